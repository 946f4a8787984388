"""What every chapter shares, by job, in the order data flows:

    data/      text in, tokens out: corpora, downloads, file formats, sentences, tokenizers, token files
    training/  a run: settings, devices, optimizer and schedules, checkpoints, the run and its bookkeeping,
               metrics, Ctrl-C, the trivial baselines, reading a transformers folder
    course/    the tools around the lessons: `uv run learn`, the exercises' helpers, the reference runs

A room imports only the rooms before it (and the three modules here that every room uses: errors, files,
progress); a chapter imports only itself and common/.
"""
