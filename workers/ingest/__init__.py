"""The offline ingest chain: fetch a NEVIS'22 source's files, read them, write a Parquet dataset.

Only the ``nevis data`` commands (fetch, mirror, convert, import-reference) use it; what the
trainer reads at run time (manifests, splits, shards, the source catalogue's pinned counts)
lives in :mod:`workers.stream`, below it. The import contract forbids the trainer, the probe
pool and the sandbox to import this package.

- :mod:`.sources`: download, verify and mirror a source's files (the catalogue they follow is
  :mod:`workers.stream.sources.catalogue`);
- :mod:`.readers`: one reader per source layout, plus the reference's TFRecord import;
- :mod:`.writers`: the Parquet dataset writer (layout: :mod:`workers.stream.formats.parquet_layout`).
"""
