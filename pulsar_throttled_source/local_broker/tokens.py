"""Token authentication for a broker started with auth_token=True: HS256 JWTs and the stored superuser token."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
from pathlib import Path

ADMIN_ROLE = "admin"  # the broker config's superUserRoles


def make_token(secret_key: bytes, subject: str) -> str:
    """An HS256 JWT as Pulsar's token authentication expects (subject = role)."""

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    header = b64(json.dumps({"alg": "HS256"}, separators=(",", ":")).encode())
    payload = b64(json.dumps({"sub": subject}, separators=(",", ":")).encode())
    signature = hmac.new(secret_key, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{b64(signature)}"


def secret_key_path(data_dir: Path) -> Path:
    return data_dir / "auth" / "secret.key"


def admin_token_path(data_dir: Path) -> Path:
    return data_dir / "auth" / "admin.token"


def ensure_admin_token(data_dir: Path) -> tuple[Path, str]:
    """Create the data dir's secret key once (a restart keeps it, so issued tokens stay valid) and write the
    superuser token next to it; return (secret key path, admin token)."""
    key = secret_key_path(data_dir)
    key.parent.mkdir(exist_ok=True)
    if not key.exists():
        key.write_bytes(os.urandom(32))
    token = make_token(key.read_bytes(), ADMIN_ROLE)
    admin_token_path(data_dir).write_text(token)
    return key, token


def admin_token(data_dir: str | Path) -> str | None:
    """The superuser token of a broker started with auth_token=True (for tests and demos)."""
    path = admin_token_path(Path(data_dir))
    return path.read_text() if path.exists() else None
