"""Death notices over Pub/Sub's REST API, with nothing but the standard library.

Paths, lightest first (the TypeScript kit's ``publishPath.ts``):

    PUBSUB_BRIDGE_URL     the local stack's bridge (REST shape, no auth)
    PUBSUB_EMULATOR_HOST  the emulator's REST endpoint (no auth)
    metadata server       Cloud Run / GCE / GKE: REST publish with the service account's access token

The project comes from the options, GOOGLE_CLOUD_PROJECT (or GCLOUD_PROJECT), or the metadata server.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, Mapping, Optional, Tuple

from .contract import DeathNotice, death_notice_attributes
from .log import KitLog
from .options import ConfigError

PUBSUB_REST_ENDPOINT = "https://pubsub.googleapis.com"


class MetadataServer:
    """The metadata server's project ID and access tokens (cached until 5 minutes before they expire)."""

    def __init__(self, host: str, timeout_s: float = 2.0) -> None:
        self.host = host
        self.timeout_s = timeout_s
        self._token: Optional[Tuple[str, float]] = None
        self._lock = threading.Lock()

    def _get(self, path: str) -> str:
        url = f"http://{self.host}/computeMetadata/v1/{path}"
        req = urllib.request.Request(url, headers={"Metadata-Flavor": "Google"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as res:
                body = res.read().decode("utf-8")
                flavor = res.headers.get("Metadata-Flavor")
                status = res.status
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"{url} answered {e.code}") from e
        # The header proves it is the metadata server and not some proxy's error page.
        if flavor != "Google":
            raise RuntimeError(f"{url} answered {status} without Metadata-Flavor: Google")
        return body

    def project_id(self) -> str:
        pid = self._get("project/project-id").strip()
        if not pid or len(pid) > 100 or not all(ch.islower() or ch.isdigit() or ch in ".:-" for ch in pid) or not pid.isascii():
            raise RuntimeError("metadata server returned an invalid project ID")
        return pid

    def token(self) -> str:
        with self._lock:
            if self._token and self._token[1] - time.time() > 300:
                return self._token[0]
            raw = json.loads(self._get("instance/service-accounts/default/token"))
            tok, exp = (raw or {}).get("access_token"), (raw or {}).get("expires_in")
            if not isinstance(tok, str) or not tok or isinstance(exp, bool) or not isinstance(exp, int) or exp <= 0:
                raise RuntimeError("metadata server returned an unreadable token")
            self._token = (tok, time.time() + exp)
            return tok


class RestPublisher:
    """Pub/Sub's REST publish: the service (with a bearer token), the emulator and the local bridge (without)."""

    def __init__(self, endpoint: str, project_id: str, metadata: Optional[MetadataServer] = None,
                 timeout_s: float = 10.0) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.project_id = project_id
        self.metadata = metadata
        self.timeout_s = timeout_s

    def _topic_url(self, topic: str) -> str:
        q = urllib.parse.quote
        return f"{self.endpoint}/v1/projects/{q(self.project_id, safe='')}/topics/{q(topic, safe='')}"

    def _headers(self) -> Dict[str, str]:
        h = {"content-type": "application/json"}
        if self.metadata is not None:
            h["authorization"] = f"Bearer {self.metadata.token()}"
        return h

    def publish(self, topic: str, message: Mapping[str, Any], attributes: Mapping[str, str],
                ordering_key: Optional[str] = None, timeout_s: Optional[float] = None) -> str:
        msg: Dict[str, Any] = {
            "data": base64.b64encode(json.dumps(message, ensure_ascii=False).encode("utf-8")).decode("ascii"),
            "attributes": dict(attributes),
        }
        if ordering_key:
            msg["orderingKey"] = ordering_key
        body = json.dumps({"messages": [msg]}).encode("utf-8")
        req = urllib.request.Request(f"{self._topic_url(topic)}:publish", data=body, headers=self._headers(),
                                     method="POST")
        try:
            with urllib.request.urlopen(req, timeout=timeout_s or self.timeout_s) as res:
                text = res.read().decode("utf-8")
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"Pub/Sub publish to {topic} failed: HTTP {e.code} {e.read()[:300]!r}") from e
        try:
            ids = json.loads(text).get("messageIds")
        except (ValueError, AttributeError):
            ids = None
        if not isinstance(ids, list) or not ids or not isinstance(ids[0], str) or not ids[0]:
            raise RuntimeError(f"Pub/Sub publish to {topic} returned no message ID")
        return ids[0]

    def warm(self, topic: str) -> None:
        """A GET of the topic, its answer ignored: the notice at shutdown must not pay for DNS, TLS or a token."""
        try:
            req = urllib.request.Request(self._topic_url(topic), headers=self._headers())
            with urllib.request.urlopen(req, timeout=5) as res:
                res.read()
        except Exception:
            pass


def create_publisher(env: Mapping[str, str], *, project: Optional[str], endpoint: Optional[str],
                     log: KitLog) -> Tuple[RestPublisher, str]:
    """The lightest path this environment offers, and its name (``bridge|emulator|rest``)."""
    project = project or env.get("GOOGLE_CLOUD_PROJECT") or env.get("GCLOUD_PROJECT") or None
    if env.get("PUBSUB_BRIDGE_URL"):
        return RestPublisher(env["PUBSUB_BRIDGE_URL"], project or "afterlife-local"), "bridge"
    if env.get("PUBSUB_EMULATOR_HOST"):
        if not project:
            raise ConfigError(["GOOGLE_CLOUD_PROJECT: set it (the emulator needs a project ID) or AFTERLIFE_PUBLISH=none"])
        return RestPublisher(f"http://{env['PUBSUB_EMULATOR_HOST']}", project), "emulator"
    metadata = MetadataServer(env.get("GCE_METADATA_HOST") or "metadata.google.internal")
    if not project:
        try:
            project = metadata.project_id()
        except Exception as e:
            raise ConfigError([
                f"death notices: no project ID and no metadata server ({e}). Set GOOGLE_CLOUD_PROJECT (and run on "
                "Google Cloud), PUBSUB_EMULATOR_HOST locally, or AFTERLIFE_PUBLISH=none"
            ]) from e
    try:
        metadata.token()
    except Exception as e:
        log.warn("no access token from the metadata server yet; retried when a death notice is sent", err=e)
    return RestPublisher(endpoint or PUBSUB_REST_ENDPOINT, project, metadata), "rest"


def publish_death_notice(publisher: RestPublisher, topic: str, notice: Mapping[str, Any],
                         timeout_s: Optional[float] = None) -> str:
    """Validates the notice with the contract's rules, then publishes it ordered by executor ID."""
    parsed = DeathNotice.parse(dict(notice))
    return publisher.publish(topic, parsed, death_notice_attributes(parsed), parsed["executorId"], timeout_s)
