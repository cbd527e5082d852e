"""``nevis check``: a learner's protocol calls, each made once in its sandbox on a tiny built-in
stream and judged, before anything is submitted."""
