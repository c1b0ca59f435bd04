"""Benchmarks: training and decoding speed side by side, data pipeline scale (``make bench``)."""

# ``python -m nmt bench TOOL``: each tool's module has ``build_parser()`` and ``main(argv)``;
# ``python -m nmt bench`` with no tool runs ``bench.run``, the table of ``make bench``
TOOLS = {"probe": "bench.probe", "threads": "bench.threads", "loop-speed": "bench.loop_speed",
         "decode-speed": "bench.decode_speed", "generate-speed": "bench.generate_speed",
         "decode-profile": "bench.decode_profile",
         "profile-step": "bench.profile_step", "base-speed": "bench.base_speed",
         "hf-scale": "bench.hf_scale", "parameters": "bench.parameters",
         "pins": "bench.arithmetic_pins"}
