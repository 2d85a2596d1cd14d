"""Start the tracking server of docker/compose.yaml, after checking its database.

A wrong password or an unreachable database otherwise surfaces as a long traceback from
the server's workers; here it is one line naming the database and what to change. With
MLFLOW_AUTH_ADMIN_PASSWORD set, MLflow's basic-auth app is on (users in the same database).
"""

import os
import secrets
import sys
import tempfile
import urllib.parse

import sqlalchemy


def redacted(uri: str) -> str:
    parts = urllib.parse.urlsplit(uri)
    if parts.password is None:
        return uri
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def check_database(uri: str) -> None:
    try:
        timeout = {"connect_timeout": 10} if uri.startswith("postgresql") else {}
        engine = sqlalchemy.create_engine(uri, connect_args=timeout)
        with engine.connect():
            pass
    except sqlalchemy.exc.OperationalError as exc:  # refused, unknown host, wrong password
        reason = str(exc.orig or exc).strip().splitlines()[0]
        sys.exit(
            f"error: cannot open the backend store {redacted(uri)}: {reason}; check "
            "POSTGRES_USER, POSTGRES_PASSWORD and POSTGRES_DB in docker/.env (a database "
            "volume keeps the credentials it was created with: `docker compose down -v` "
            "starts it afresh)"
        )
    except Exception as exc:  # a URI or driver problem: still one line
        reason = str(exc).strip().splitlines()[0]
        sys.exit(f"error: cannot open the backend store {redacted(uri)}: {reason}")


def main() -> None:
    uri = os.environ.get("MLFLOW_BACKEND_STORE_URI")
    if not uri:
        sys.exit("error: MLFLOW_BACKEND_STORE_URI is not set")
    check_database(uri)
    args = [
        "mlflow",
        "server",
        "--host",
        "0.0.0.0",
        "--port",
        "5000",
        "--workers",
        "1",
        "--artifacts-destination",
        os.environ.get("MLFLOW_ARTIFACTS_DESTINATION", "/mlflow/artifacts"),
        "--allowed-hosts",
        os.environ.get("MLFLOW_ALLOWED_HOSTS", "mlflow,mlflow:5000,localhost:*,127.0.0.1:*"),
        # the health check calls every few seconds: an access log would be mostly that
        "--uvicorn-opts",
        "--no-access-log",
    ]
    if os.environ.get("MLFLOW_AUTH_ADMIN_PASSWORD"):
        if len(os.environ["MLFLOW_AUTH_ADMIN_PASSWORD"]) < 12:  # MLflow's rule, as a traceback
            sys.exit("error: MLFLOW_AUTH_ADMIN_PASSWORD must be at least 12 characters (docker/.env)")
        config = tempfile.NamedTemporaryFile("w", suffix=".ini", delete=False)
        config.write(
            "[mlflow]\ndefault_permission = READ\n"
            f"database_uri = {uri.replace('%', '%%')}\n"
            f"admin_username = {os.environ.get('MLFLOW_AUTH_ADMIN_USERNAME', 'admin')}\n"
            "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n"
        )
        config.close()
        os.environ["MLFLOW_AUTH_CONFIG_PATH"] = config.name
        # the auth app's CSRF protection needs a key; one server process may make its own
        if not os.environ.get("MLFLOW_FLASK_SERVER_SECRET_KEY"):
            os.environ["MLFLOW_FLASK_SERVER_SECRET_KEY"] = secrets.token_hex(32)
        args += ["--app-name", "basic-auth"]
    os.execvp(args[0], args + sys.argv[1:])


if __name__ == "__main__":
    main()
