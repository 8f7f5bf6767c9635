"""Token authentication for a broker started with auth_token=True: HS256 JWTs and the stored superuser token; RS256
JWTs for a secured local cluster (cluster_security.py), whose members verify tokens with a public key."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

ADMIN_ROLE = "admin"  # the broker config's superUserRoles


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _signing_input(alg: str, claims: dict[str, Any]) -> str:
    header = _b64(json.dumps({"alg": alg}, separators=(",", ":")).encode())
    return f"{header}.{_b64(json.dumps(claims, separators=(',', ':')).encode())}"


def make_token(secret_key: bytes, subject: str) -> str:
    """An HS256 JWT as Pulsar's token authentication expects (subject = role)."""
    signed = _signing_input("HS256", {"sub": subject})
    return f"{signed}.{_b64(hmac.new(secret_key, signed.encode(), hashlib.sha256).digest())}"


def make_rs256_token(private_key_pem: bytes, claims: dict[str, Any]) -> str:
    """An RS256 JWT of `claims` (e.g. sub = role, aud, exp), signed with an RSA private key (PEM), as an OAuth2
    server's access tokens are: a broker with that key's public half as tokenPublicKey accepts both."""
    key = serialization.load_pem_private_key(private_key_pem, password=None)
    if not isinstance(key, rsa.RSAPrivateKey):
        raise ValueError("RS256 needs an RSA private key")
    signed = _signing_input("RS256", claims)
    return f"{signed}.{_b64(key.sign(signed.encode(), padding.PKCS1v15(), hashes.SHA256()))}"


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
