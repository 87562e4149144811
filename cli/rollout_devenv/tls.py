"""A throwaway TLS identity for local servers: a self-signed certificate for 127.0.0.1 and
localhost, made with the `openssl` command.

Clients trust the certificate itself as their CA. Kafka reads the key and certificate from a
PKCS12 keystore, Redis from the PEM files.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from rollout_devenv._proc import DevenvError

_DAYS = "7"
_SUBJECT_ALT_NAMES = "subjectAltName=IP:127.0.0.1,DNS:localhost"


@dataclass(frozen=True, slots=True)
class TlsFiles:
    cert: Path
    key: Path
    keystore: Path
    # Only protects a keystore that lives as long as a test run; Kafka refuses one without.
    keystore_password: str


def _openssl(*args: str) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise DevenvError("openssl is not installed (Debian package openssl)")
    done = subprocess.run([openssl, *args], capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0:
        raise DevenvError(f"openssl {args[0]} failed (exit {done.returncode})", detail=done.stderr.strip())


def self_signed(directory: Path, *, password: str = "rollout-local-tls") -> TlsFiles:
    """Write a key, its self-signed certificate and a PKCS12 keystore of both into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    files = TlsFiles(directory / "cert.pem", directory / "key.pem", directory / "keystore.p12", password)
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", _DAYS, "-subj", "/CN=localhost",
        "-addext", _SUBJECT_ALT_NAMES, "-keyout", str(files.key), "-out", str(files.cert),
    )  # fmt: skip
    _openssl(
        "pkcs12", "-export", "-in", str(files.cert), "-inkey", str(files.key), "-name", "localhost",
        "-out", str(files.keystore), "-passout", f"pass:{password}",
    )  # fmt: skip
    files.key.chmod(0o600)
    return files
