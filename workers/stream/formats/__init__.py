"""On-disk dataset formats that ``prepare`` reads.

``parquet_layout`` says what a Parquet dataset file holds (docs/data-format.md); the ingest
chain's :mod:`workers.ingest.writers.parquet_writer` writes one and the ``parquet`` adapter
(:mod:`workers.stream.adapters.parquet_file`) reads it.
"""
