"""Benchmarks: training and decoding speed side by side, data pipeline scale (``make bench``)."""

# the benchmark tools with a command line (``python -m bench.<name>``), each with ``build_parser()``;
# ``python -m nmt bench`` (bench.run) runs the table of ``make bench``
TOOLS = ["run", "probe", "threads", "loop_speed", "decode_speed", "decode_profile", "profile_step", "gpu_check",
         "base_speed", "hf_scale"]
