"""``NetaApp``: the jupyter-server extension that owns the runtime and serves the run API."""

from __future__ import annotations

import asyncio
import gc
import os
import secrets
from pathlib import Path
from typing import IO

from jupyter_core.paths import jupyter_data_dir
from jupyter_server.extension.application import ExtensionApp
from tornado.ioloop import IOLoop
from traitlets import Dict, Enum, Float, Int, List, Unicode, default

from ..crews.manager import Crews
from ..extras import COLLABORATION
from ..mcp import McpServers, servers_of
from ..notebook_mcp.server import McpDoor
from ..runtime import Runtime
from ..runtime.context.attachments import UPLOADS
from ..runtime.context.uploads import sweep as sweep_uploads
from ..runtime.settings import NetaSettings, build_runtime
from ..store import StorageDamaged, StorageError, Store
from ..store.health import DB_NAME, recovery_steps
from .activity import RunActivity
from .compression import POLICIES
from .datadir import DataDirInUse, lock_data_dir, network_filesystem
from .kernels import ServerKernels, kernels_for
from .mcp_endpoint import DoorKeeper
from .mcp_workspace import ServerWorkspace
from .notebooks import YDOC_EXTENSION, ServerNotebooks, ydoc_extension
from .openapi import document
from .principals import KernelOwners
from .redaction import install_redaction
from .routes import routes
from .store_start import start_store, store_location
from .targets import ServerTargets
from .unavailable import UnavailableHandler
from .webhooks import Webhooks, webhooks_of


class NetaApp(ExtensionApp, NetaSettings):
    """Configure with ``c.NetaApp.<trait>`` in ``jupyter_server_config.py``.

    The settings of runs (model, endpoints, rules, limits) come from :class:`NetaSettings`, which
    the terminal client reads from the same files; the traits here are the server's own.
    """

    name = "neta_jupyter"
    load_other_extensions = True

    data_dir = Unicode(
        "",
        help="Where the event log, attachments and logs live (default: <jupyter data dir>/neta).",
    ).tag(config=True)
    attachment_dir = Unicode(
        help="Where attachments' bytes are stored (uploads, imported URLs, files runs make); "
        "default $NETA_ATTACHMENT_DIR, else 'attachments' in the data dir. Servers sharing runs "
        "through Redis must all see the same directory here (a shared volume): Redis holds only "
        "the attachments' records, never their bytes.",
    ).tag(config=True)

    @default("attachment_dir")
    def _attachment_dir_from_environment(self) -> str:
        return os.environ.get("NETA_ATTACHMENT_DIR", "")

    db_path = Unicode(
        "", help="SQLite file of the event log (default: <data_dir>/neta.sqlite3)."
    ).tag(config=True)
    store_url = Unicode(
        help="Where runs are stored: empty for the SQLite file (the default), or a Redis "
        "(redis://, rediss:// or unix://) that keeps an append-only file and never evicts keys. "
        "Default: $NETA_STORE_URL. Its password is treated as a secret.",
    ).tag(config=True)

    @default("store_url")
    def _store_url_from_environment(self) -> str:
        return os.environ.get("NETA_STORE_URL", "")

    store_user = Unicode(
        help="With runs in Redis: the one Jupyter user whose runs this server keeps (a "
        "JupyterHub single-user server's user). The server then reads and writes only that "
        "user's keys, neta:{u:<user>}:*, so a Redis user limited to them is enough, and it "
        "refuses other users' requests (403 USER_NOT_SERVED). Empty: every user's runs, which "
        "needs a Redis user that may read every key. Default: $NETA_STORE_USER.",
    ).tag(config=True)

    @default("store_user")
    def _store_user_from_environment(self) -> str:
        return os.environ.get("NETA_STORE_USER", "")

    heartbeat_interval = Float(15.0, help="Seconds between HEARTBEAT frames on idle streams.").tag(
        config=True
    )
    commit_interval = Float(
        0.008,
        help="Longest wait of an event for its group commit under load, in seconds (while "
        "commits are cheap, each is made at once). Longer windows make bigger commits, which cost "
        "less per event when many runs write at once.",
    ).tag(config=True)
    lease_ttl = Float(
        15.0,
        help="With runs in Redis: seconds a server's hold on a run it executes lasts unless "
        "renewed (renewed every third of it). Once it lapses, because the server died or "
        "stalled, another server takes the run over.",
    ).tag(config=True)
    sweep_interval = Float(
        5.0,
        help="With runs in Redis: seconds between looks for runs whose server stopped renewing "
        "its hold on them; such a run ends as interrupted by a crash (and can be retried).",
    ).tag(config=True)
    handoff_timeout = Float(
        30.0,
        help="With runs in Redis: seconds a server waits for the server hosting a run's kernel "
        "to answer a resume, permission answer or retry handed to it, before answering 503 "
        "KERNEL_HOST_UNREACHABLE.",
    ).tag(config=True)
    stream_compression = Enum(
        list(POLICIES),
        default_value="auto",
        help="Compress the run API's event streams (gzip over SSE, permessage-deflate over the "
        "WebSocket) for clients that accept it: 'auto' for every client but a browser on this "
        "machine reaching the server directly (bytes are free there, compressing costs CPU); "
        "'always'; 'never'.",
    ).tag(config=True)
    activity_interval = Float(
        60.0,
        help="Seconds between reports of activity while runs execute, so that an idle culler "
        "(Jupyter's or JupyterHub's) never stops the server in the middle of a run.",
    ).tag(config=True)
    max_body_bytes = Int(1_000_000, help="Largest accepted REST request body.").tag(config=True)
    image_hosts = List(
        Unicode(),
        help="Hosts whose images in model output the widget shows at once ('*.example.org' "
        "includes subdomains); other remote images wait for a click, since an image URL can "
        "carry data to its host.",
    ).tag(config=True)
    webhooks = List(
        Dict(),
        help="Called when a run's stream segment ends: [{url, events, secret}]; events are "
        "terminal event types (default MESSAGE_COMPLETED, MESSAGE_FAILED and MESSAGE_SUSPENDED); "
        "with a secret the body is signed (X-Neta-Signature-256: sha256=<HMAC-SHA256 hex>). "
        "Failed calls are retried with backoff; runs never wait for them.",
    ).tag(config=True)
    mcp_ask_timeout = Float(
        600.0,
        help="Seconds a call of an outside agent through neta's MCP server ({base_url}neta/mcp) "
        "waits for the user's approval before it fails saying nobody answered.",
    ).tag(config=True)
    mcp_progress_interval = Float(
        5.0,
        help="Seconds between the progress notifications an MCP call sends while it runs or "
        "waits for an approval (clients that asked for progress keep waiting on them).",
    ).tag(config=True)
    mcp_idle_timeout = Float(
        3600.0,
        help="Seconds an MCP session with no request in flight is kept before it ends (and its "
        "run completes).",
    ).tag(config=True)
    webhook_retries = Int(6, help="Times a failed webhook call is sent again.").tag(config=True)
    webhook_retry_delay = Float(
        1.0, help="Seconds before a failed webhook call is sent again; doubles each time."
    ).tag(config=True)

    runtime: Runtime
    notifier: Webhooks | None = None
    crews: Crews
    store: Store
    kernels: ServerKernels | None = None
    activity: RunActivity | None = None
    _data_lock: IO[str] | None = None
    notebooks: ServerNotebooks | None = None
    mcp: McpServers | None = None
    door: DoorKeeper | None = None
    """neta's own MCP server, for outside agents (``{base_url}neta/mcp``)."""
    store_failure: StorageError | None = None
    """Why the store could not be opened (then every route answers 503)."""

    def initialize_settings(self) -> None:
        """Open the store, build the runtime and end runs a crash left running.

        A store that cannot be opened leaves the run API answering 503 with what is wrong.
        """
        data_dir = Path(self.data_dir or Path(jupyter_data_dir()) / "neta")
        self.kernel_token = secrets.token_urlsafe(32)
        try:
            self._open(data_dir)
        except StorageError as exc:
            where = self.db_path or data_dir / DB_NAME
            plain = self.store_url or isinstance(exc, DataDirInUse)
            self.store_failure = exc if plain else _with_steps(exc, where)
            self.settings["neta_store_failure"] = self.store_failure
            self.log.error("neta: the run API is off: %s", self.store_failure.message)
        # Kernels inherit the server's environment: this is how a kernel finds its server and
        # proves it was started by it (kernel/ reads these). Kernels the kernel manager starts get
        # a token of their own instead, bound to the user who started them (principals.py).
        os.environ["NETA_KERNEL_TOKEN"] = self.kernel_token
        if self.serverapp is not None:
            os.environ["NETA_SERVER_URL"] = self.serverapp.connection_url
            # A kernel whose JPY_PARENT_PID differs was started by someone else (e.g. nbclient
            # in a terminal of this server) and must not claim this server's kernel tools.
            os.environ["NETA_SERVER_PID"] = str(os.getpid())
        # The server's start-up objects live as long as it does: keep full collections from
        # rescanning them (measured: 120-180 ms pauses of the event loop under load).
        gc.freeze()
        self._share_with_pages()
        self.settings.update(
            neta_kernel_token=self.kernel_token,
            neta_heartbeat_interval=self.heartbeat_interval,
            neta_max_body_bytes=self.max_body_bytes,
            neta_stream_compression=self.stream_compression,
            neta_openapi=document,
        )

    def _open(self, data_dir: Path) -> None:
        """The store, the runtime on it, and what needs them; a StorageError if it cannot open."""
        root = Path(self.serverapp.root_dir).expanduser() if self.serverapp else Path.cwd()
        if not self.store_url:
            self._local_database(Path(self.db_path or data_dir / DB_NAME))
        self.store = Store(
            store_location(self.store_url, self.db_path or data_dir / DB_NAME),
            commit_interval=self.commit_interval,
            lease_ttl=self.lease_ttl,
            event_retention=self.event_retention,
            store_user=self.store_user or None,
            logger=self.log,
        )
        # Before the start-up recovery, whose endings are delivered too.
        self.notifier = webhooks_of(
            self.webhooks,
            self.log,
            retries=self.webhook_retries,
            retry_delay=self.webhook_retry_delay,
            allowlist=self.url_allowlist,
        )
        self.notifier.watch(self.store)
        self.kernels = kernels_for(self.serverapp) if self.serverapp is not None else None
        self.notebooks = (
            ServerNotebooks(self.serverapp, self.store.records) if self.serverapp else None
        )
        self.runtime = build_runtime(
            self,
            self.store,
            root_dir=root,
            data_dir=data_dir,
            kernels=self.kernels,
            notebooks=self.notebooks,
            logger=self.log,
            attachment_dir=Path(self.attachment_dir).expanduser() if self.attachment_dir else None,
        )
        if self.serverapp is not None and self.notebooks is not None:
            self.runtime.targets = ServerTargets(self.serverapp, self.notebooks, self.store.leases)
        self._host_kernels()
        self.crews = Crews(self.runtime)
        try:
            crashed = start_store(self.store, self._recover, self.log)
        except StorageError:
            self.store.close()
            raise
        if crashed:
            self.log.warning("neta: %d run(s) were interrupted by a crash (SYSTEM_CRASH)", crashed)
        install_redaction(self.serverapp, self.store.redactor, self.kernel_token)
        owners = KernelOwners(self.store.redactor)
        if self.serverapp is not None:
            owners.install(self.serverapp.kernel_manager)
        self.mcp = servers_of(self.runtime.tools)
        self._open_door(owners)
        # Started once the event loop runs (servers that are slow to start delay no request).
        IOLoop.current().add_callback(self._start_mcp)
        self.settings.update(
            neta_runtime=self.runtime,
            neta_notebooks=self.notebooks,
            neta_crews=self.crews,
            neta_kernel_owners=owners,
            neta_redactor=self.store.redactor,
        )

    def _open_door(self, owners: KernelOwners) -> None:
        if self.serverapp is None or self.notebooks is None or self.kernels is None:
            return
        workspace = ServerWorkspace(self.serverapp, self.notebooks, self.kernels, owners)
        door = McpDoor(
            self.runtime,
            workspace,
            ask_timeout=self.mcp_ask_timeout,
            keepalive=self.mcp_progress_interval,
            idle_timeout=self.mcp_idle_timeout,
        )
        self.door = DoorKeeper(door)
        self.settings["neta_mcp"] = self.door

    def _host_kernels(self) -> None:
        """Runs bound to this server's kernels go on here, wherever they are resumed."""
        self.runtime.takeover.handoff.wait = self.handoff_timeout
        if self.serverapp is not None:
            kernel_manager = self.serverapp.kernel_manager
            self.store.leases.kernels_alive(lambda kid: kid in kernel_manager.list_kernel_ids())

    async def _recover(self) -> int:
        """Runs a crash left running end per the crash rules; then the crews they belong to."""
        crashed = await self.runtime.recover()
        await self.crews.recover()
        config = self.runtime.config
        uploads = config.attachments_dir / UPLOADS
        sweep_uploads(uploads, config.upload_quota.retention)  # at start-up: nothing waits on it
        return crashed

    def _local_database(self, db_path: Path) -> None:
        """Hold the SQLite database's lock; warn when it is on a network filesystem."""
        self._data_lock = lock_data_dir(db_path)
        kind = network_filesystem(db_path.parent)
        if kind is not None:
            self.log.warning(
                "neta: the run database %s is on a network filesystem (%s); SQLite may lose "
                "its locks or its data there when a server crashes: keep it on a local disk "
                "(c.NetaApp.data_dir), or share runs between servers through Redis "
                "(c.NetaApp.store_url)",
                db_path,
                kind,
            )

    def _start_mcp(self) -> None:
        if self.mcp is not None:
            self._mcp_start = asyncio.ensure_future(self.mcp.start_at_startup())

    def _share_with_pages(self) -> None:
        """Settings the widget reads from the page (JupyterLab's and Notebook's page config)."""
        web_app = getattr(self.serverapp, "web_app", None)
        if web_app is None:
            return
        page_config = web_app.settings.setdefault("page_config_data", {})
        page_config["netaImageHosts"] = list(self.image_hosts)

    def initialize_handlers(self) -> None:
        """Routes of DESIGN §5 (the server prefixes its base_url), from :mod:`.routes`."""
        self.handlers.extend(routes("/neta/api"))
        if self.store_failure is not None:
            # Every route stays, answering why: a missing route would only say 404.
            self.handlers = [(route[0], UnavailableHandler) for route in self.handlers]

    async def _start_jupyter_server_extension(self, serverapp: object) -> None:
        """Once the event loop runs: timers for the runs that wait for a person."""
        if self.door is not None:
            self.door.start()
        if self.store_failure is None:
            self.runtime.waiting.watch_stored()
            self.runtime.takeover.sweep_interval = self.sweep_interval
            self.runtime.takeover.start()
            settings = self.serverapp.web_app.settings if self.serverapp else self.settings
            self.activity = RunActivity(settings, self.runtime, self.activity_interval)
            self.activity.start()
            self.runtime.background.resume_stored()
        if self.notifier is not None:
            self.notifier.start()
        if self.notebooks is not None and ydoc_extension(self.serverapp) is None:
            self.log.warning(
                "neta: the collaboration extension (%s) is not loaded: %s; for live edits: %s",
                YDOC_EXTENSION,
                COLLABORATION.without,
                COLLABORATION.install,
            )

    async def stop_extension(self) -> None:
        """Suspend executing runs (SHUTDOWN_INTERRUPT) and close the store."""
        if self.activity is not None:
            self.activity.stop()
        if self.door is not None:
            await self.door.stop()  # its sessions' runs complete
        if self.store_failure is None:
            await self.crews.shutdown()
            await self.runtime.shutdown()  # and the MCP servers
        if self.notifier is not None:
            await self.notifier.close()  # after the runs' endings had their moment
        if self.kernels is not None:
            await self.kernels.close()
        if self.store_failure is None:
            self.store.close()
        if self._data_lock is not None:
            self._data_lock.close()  # another server may use the database from now on


def _with_steps(failure: StorageError, db_path: str | Path) -> StorageError:
    """The failure, with what to do about it in its message."""
    if isinstance(failure, StorageDamaged):
        steps = recovery_steps(db_path)
    else:
        steps = "fix that (free some disk space, or check the disk), then restart the server"
    message = f"the event store cannot be opened: {failure.message}. To recover, {steps}."
    return type(failure)(message, reason=failure.reason)
