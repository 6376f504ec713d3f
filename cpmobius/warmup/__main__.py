"""``python -m cpmobius.warmup <verl sft_trainer_engine overrides>``: one process of the Coach SFT
warm-up under torchrun (`cpmobius.warmup.sft.main`; `run_warmup` starts it)."""

import sys

USAGE = """usage: python -m cpmobius.warmup <verl sft_trainer overrides>   (one torchrun process; not run by hand)

The Coach's SFT warm-up (paper §3): one process of verl's SFT trainer, started under torchrun by
`python -m cpmobius.main` (cpmobius.warmup.sft.run_warmup) with the overrides it builds from the config's
warmup.* keys. To run or change the warm-up, use the main command:

  python -m cpmobius.main warmup.enabled=true warmup.epochs=2 ...   # warmup.* keys: configs/cpmobius.yaml
  python -m cpmobius.main --help                                     # every group and key

verl's own SFT options: python -m verl.trainer.sft_trainer --help"""

if __name__ == "__main__":
    if any(arg in ("-h", "--help") for arg in sys.argv[1:]):
        print(USAGE)
        sys.exit(0)
    from cpmobius.warmup.sft import main

    main()
