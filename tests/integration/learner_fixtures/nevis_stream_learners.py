"""A learner that records what a streamed task's view offered it (tests/integration/test_streamed_task.py).

``stream_recorder`` trains the nearest-mean predictor from ``view.train()`` (assembled from the
shards the host asked for) and keeps in its state what ``view.train_stream`` offered: whether
it offered a stream, its length, one batch's shapes, and every label of one epoch of it.
"""

from __future__ import annotations

import numpy as np
from nevis_test_learners import NearestMeanLearner


class StreamRecorder(NearestMeanLearner):
    name = "stream-recorder"

    def train(self, view, state, config, ctx):
        stream = view.train_stream(ctx.seed)
        seen = {"offered": stream is not None}
        if stream is not None:
            batches = stream.batches(4)
            batch = next(batches)
            batches.close()  # its reader threads end with it
            epoch_stream = view.train_stream(ctx.seed)  # a fresh one: its peak is one reader's
            epoch = np.concatenate([b.labels for b in _one_epoch(epoch_stream)])
            seen.update(
                rows=len(stream),
                batch_images=batch.images.shape,
                batch_originals=None if batch.originals is None else batch.originals.images.shape,
                epoch_labels=sorted(epoch.tolist()),
                peak_shards=epoch_stream.peak_shards,
            )
        whole = view.train()
        seen.update(whole_rows=len(whole.images), whole_labels=sorted(whole.labels.tolist()))
        output = super().train(view, state, config, ctx)
        return type(output)(predictor=output.predictor, state={**output.state, "seen": seen})


def _one_epoch(stream):
    """Batches of one row until the stream has handed out each of its rows once."""
    batches = stream.batches(1)
    epoch = [next(batches) for _ in range(len(stream))]
    batches.close()
    return epoch


def stream_recorder() -> StreamRecorder:
    return StreamRecorder()
