"""Writers of the on-disk dataset formats that sources are converted into before preparation.

:mod:`.parquet_writer` writes a Parquet dataset one row group at a time; what the file holds is
:mod:`workers.stream.formats.parquet_layout`, shared with the ``parquet`` adapter that reads it.
"""
