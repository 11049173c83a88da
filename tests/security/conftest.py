"""The attack suite reuses the dock's fixtures (a real harborlab index, the fake model server,
the Flask test client and a real gunicorn)."""

from tests.dock.conftest import (app, client, data_dir, dock_index, model,  # noqa: F401
                                 running_dock, settings)
