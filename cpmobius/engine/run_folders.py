"""The run folder of a command line: one that this user can create (or write), checked before Hydra makes its
log folder inside it (``hydra.run.dir``), which used to fail as Hydra's traceback."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from omegaconf import OmegaConf

from cpmobius.config import CONFIG_DIR, CONFIG_NAME, ConfigError


def check_output_dir(path: str, key: str = "trainer.default_local_dir") -> None:
    """The folder ``path`` must be one this process can create (or write in, when it exists).

    Creates nothing: a temporary folder is made and removed in the nearest existing ancestor.

    Raises:
        ConfigError: naming ``key``, the path and the operating system's reason.
    """
    folder = Path(str(path)).expanduser().absolute()
    ancestor = folder
    while not ancestor.exists() and ancestor != ancestor.parent:
        if ancestor.is_symlink():  # a link to an unmounted disk: mkdir fails with FileExistsError, not here
            raise ConfigError(
                f"{key}: cannot create {folder}: {ancestor} is a link to {os.readlink(ancestor)}, which does not exist"
            )
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise ConfigError(f"{key}: cannot create {folder}: {ancestor} is a file, not a folder")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".cpmobius-write-check-", dir=ancestor))
    except OSError as error:
        reason = error.strerror or type(error).__name__
        action = "write in" if ancestor == folder else "create"
        raise ConfigError(f"{key}: cannot {action} {folder} ({ancestor}: {reason})") from error


def check_run_folders(overrides: list[str]) -> None:
    """`check_output_dir` on ``trainer.default_local_dir`` and ``hydra.run.dir`` of the command line ``overrides``.

    A command line that does not compose passes here (the run's own checks report it as one line afterwards).

    Raises:
        ConfigError: naming the key whose folder cannot be created or written.
    """
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
            cfg = compose(config_name=CONFIG_NAME, overrides=list(overrides), return_hydra_config=True)
        folders = {key: OmegaConf.select(cfg, key) for key in ("trainer.default_local_dir", "hydra.run.dir")}
    except (HydraException, ValueError):  # an unknown key or a bad value: reported by the run's own checks
        return
    finally:
        GlobalHydra.instance().clear()
    for key, folder in folders.items():
        if folder:
            check_output_dir(str(folder), key)
