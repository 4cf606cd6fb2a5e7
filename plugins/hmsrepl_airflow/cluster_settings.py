"""The applications' settings for a driver that Spark starts elsewhere (``--deploy-mode cluster``).

In client mode the driver is spark-submit's child and inherits the task's environment, where
``app_settings`` puts the ``HMSREPL_*`` settings. In cluster mode the driver starts in a container of the
cluster manager and sees none of it, so the settings go the way Spark documents for the driver's environment:

- YARN: ``spark.yarn.appMasterEnv.<NAME>`` (the application master runs the driver);
- Kubernetes: ``spark.kubernetes.driverEnv.<NAME>``, and for a secret (a database URL holding its password) a
  Kubernetes secret the operator created, named by ``HMSREPL_K8S_SECRET``, with
  ``spark.kubernetes.driver.secretKeyRef.<NAME>=<secret>:<key>`` (the key is the variable's name in lower
  case, dashes for underscores).

They are written to a properties file that only the task's user can read, handed to spark-submit with
``--extra-properties-file`` (Spark 4.1 and later; it is layered over ``spark-defaults.conf``, which
``--properties-file`` would replace): never as ``--conf`` arguments, which ``ps`` shows to every user of the worker. Spark's
redaction pattern is extended so that the UI and event logs show these variables' values as redacted.
Other masters have no documented way to set a Python driver's environment in cluster mode; a run there is
refused with one line.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

#: Spark's default ``spark.redaction.regex``, with the product's variables that may hold a secret added.
REDACTION_REGEX = r"(?i)secret|password|token|access[.]?key|HMSREPL_[A-Z]+_DB_URL"
#: Names a Kubernetes secret holding the applications' secret settings (one key per variable).
K8S_SECRET_VARIABLE = "HMSREPL_K8S_SECRET"


class ClusterModeError(ValueError):
    """A cluster-mode submission that cannot hand the driver its settings; the message says what to set."""


@dataclass(frozen=True)
class ClusterSubmission:
    """Where the driver runs: the Spark connection's master and deploy mode."""

    master: str
    deploy_mode: str | None

    @property
    def is_cluster(self) -> bool:
        return (self.deploy_mode or "").strip().lower() == "cluster"

    @property
    def manager(self) -> str:
        master = self.master.strip().lower()
        if master.startswith("yarn"):
            return "yarn"
        if master.startswith("k8s://"):
            return "kubernetes"
        return master.split("://", 1)[0] or master


def settings_to_hand_over(env: Mapping[str, str]) -> dict[str, str]:
    """The product's settings among ``env``: what the applications read (``HMSREPL_*``)."""
    return {name: value for name, value in env.items() if name.startswith("HMSREPL_") and value}


def is_secret(name: str, value: str) -> bool:
    """Whether a setting's value is a secret: a database URL that carries a password, or a name Spark itself
    treats as secret."""
    if name.endswith("_DB_URL"):
        try:
            return make_url(value).password is not None
        except ArgumentError:
            return False
    return bool(re.search(r"(?i)secret|password|token", name))


def driver_properties(submission: ClusterSubmission, env: Mapping[str, str]) -> dict[str, str]:
    """The Spark properties that give a cluster-mode driver the settings of ``env``."""
    settings = settings_to_hand_over(env)
    properties = {"spark.redaction.regex": REDACTION_REGEX}
    if submission.manager == "yarn":
        properties.update({f"spark.yarn.appMasterEnv.{name}": value for name, value in settings.items()})
        return properties
    if submission.manager == "kubernetes":
        secret = env.get(K8S_SECRET_VARIABLE, "").strip()
        for name, value in settings.items():
            if name == K8S_SECRET_VARIABLE:
                continue
            if is_secret(name, value):
                if not secret:
                    raise ClusterModeError(
                        f"{name} holds a password and the driver runs on Kubernetes in cluster mode: create a "
                        f"Kubernetes secret with key '{secret_key(name)}' and set {K8S_SECRET_VARIABLE} to its name"
                    )
                properties[f"spark.kubernetes.driver.secretKeyRef.{name}"] = f"{secret}:{secret_key(name)}"
            else:
                properties[f"spark.kubernetes.driverEnv.{name}"] = value
        return properties
    raise ClusterModeError(
        f"Spark master '{submission.master}' has no way to set a Python driver's environment in cluster deploy "
        "mode; use YARN or Kubernetes for cluster mode, or set the Spark connection's deploy-mode to client"
    )


def secret_key(name: str) -> str:
    """The key of ``name`` in the operator's Kubernetes secret (keys are DNS-style: lower case and dashes)."""
    return name.lower().replace("_", "-")


def properties_text(properties: Mapping[str, str]) -> str:
    """``properties`` in the Java properties format spark-submit reads (values escaped as Java requires)."""

    def escape(text: str, *, key: bool) -> str:
        text = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
        text = text.replace("=", "\\=").replace(":", "\\:").replace("#", "\\#").replace("!", "\\!")
        if key:
            text = text.replace(" ", "\\ ")
        elif text.startswith(" "):
            text = "\\" + text
        units = text.encode("utf-16-be")  # Java escapes UTF-16 code units, surrogate pairs included
        return "".join(
            chr(unit) if 0x20 <= unit < 0x7F else f"\\u{unit:04x}"
            for unit in (int.from_bytes(units[i : i + 2], "big") for i in range(0, len(units), 2))
        )

    return "".join(f"{escape(k, key=True)}={escape(v, key=False)}\n" for k, v in sorted(properties.items()))


@contextmanager
def properties_file(properties: Mapping[str, str]) -> Iterator[str]:
    """A properties file readable by this user only, removed when the submission returns."""
    descriptor, path = tempfile.mkstemp(prefix="hmsrepl-spark-", suffix=".properties")
    try:
        with os.fdopen(descriptor, "w", encoding="ascii") as out:
            out.write(properties_text(properties))
        yield path
    finally:
        os.unlink(path)
