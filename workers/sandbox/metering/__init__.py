"""What a learner host's work cost: the FLOP meter behind ``ctx.track`` and ``ctx.report_flops``
(:mod:`.flops`, :mod:`.flop_counter`, :mod:`.flop_keys`, :mod:`.flop_watch`), the node's
achieved rates that set the FLOP floor (:mod:`.calibration`, :mod:`.gpu_calibration`), and the
CPU, memory and GPU a host's processes used (:mod:`.usage`, :mod:`.gpu_usage`).

Kept apart from the host protocol (issue 45 item 1: the sandbox by concern).
"""
