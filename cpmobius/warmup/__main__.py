"""``python -m cpmobius.warmup <verl sft_trainer_engine overrides>``: one process of the Coach SFT
warm-up under torchrun (`cpmobius.warmup.sft.main`; `run_warmup` starts it)."""

from cpmobius.warmup.sft import main

if __name__ == "__main__":
    main()
