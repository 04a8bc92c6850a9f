"""Pure parsers of the tools' outputs the DPU fabric reads: OVSDB JSON (:mod:`.dbjson`), NVIDIA
firmware tools (:mod:`.mlx`), datapath flows and tc filters (:mod:`.offload`), and the DPU's
mode and firmware as facts with the move gate (:mod:`.dpumode`)."""
