"""On-disk dataset formats that sources are converted into before preparation.

``parquet_layout`` says what a Parquet dataset file holds (docs/data-format.md) and
``parquet_writer`` writes one row group at a time; the ``parquet`` adapter
(:mod:`workers.stream.adapters.parquet_file`) reads them.
"""
