"""Getting a NEVIS'22 source's files: download, verify, mirror, check hand-placed files.

:mod:`.fetch` downloads a stream's files into the data folder, :mod:`.mirror` copies them into
an S3 mirror for clusters without internet, :mod:`.placed` checks files placed by hand. What
each source is (files, URLs, checksums, pinned counts) is the catalogue,
:mod:`workers.stream.sources.catalogue`, which stays in the stream because ``prepare`` checks
counts against it at run time.
"""
