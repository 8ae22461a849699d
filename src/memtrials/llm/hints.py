"""What a refused request means, read from the server's own words, not its status alone.

Behind a router the status says little: a LiteLLM proxy answers 400 to a request whose key
was wrong, 401 when the key *it* holds for the provider behind it was refused (the user's
key was fine), and 400 for a model name it does not route.  :func:`server_message` takes the
server's message out of an error body; :func:`explain` names the cause and the fix from it
(falling back on the status), for the model client's errors
(:func:`memtrials.llm.retry.send_with_retries`) and for ``models check``
(:mod:`memtrials.llm.check`), which quote the message as well.
"""

from __future__ import annotations

import json
import re
from typing import Any

# the router's (or server's) refusal of the client's own key
_OWN_KEY = re.compile(r"invalid proxy server token|invalid user key|token[_ ]not[_ ]found|virtual key|"
                      r"no api key passed in|invalid api[_ -]?key passed|api key (is )?(invalid|missing|expired)|"
                      r"missing authentication", re.I)
# the refusal of a key by a provider behind a router (a nested provider error)
_UPSTREAM = re.compile(r"exception\s*-|litellm\.|upstream|provider returned|error code: 40[13] -", re.I)
_KEY_WORDS = re.compile(r"authenticationerror|incorrect api key|invalid[_ ]api[_ ]key|api[_ ]key|"
                        r"authentication error|permission denied|unauthori[sz]ed", re.I)
_MODEL = re.compile(r"invalid model name|model_not_found|no (deployments|model_name) |"
                    r"model[^.]{0,80}(does not exist|not found|is not supported|unknown)|unknown model|"
                    r"no such model|there is no 'model_name'", re.I)


def server_message(body: Any, fallback: str = "") -> str:
    """The server's message in an error body (``{"error": {"message": ...}}``, ``{"message": ...}``,
    ``{"error": "..."}``, or the text itself), on one line, at most 400 characters."""
    if isinstance(body, (bytes, str)):
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        try:
            body = json.loads(text)
        except ValueError:
            body = text
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            body = inner.get("message") or inner.get("detail") or json.dumps(inner)
        else:
            body = inner
    message = " ".join(str(body or fallback).split())
    return message if len(message) <= 400 else message[:397] + "..."


def explain(status: int, message: str, *, name: str, source: str, model: str, key_env: str | None,
            base_url: str | None) -> str:
    """``Cause. Fix: ...`` for a refused request to endpoint ``name`` (registry ``source``)."""
    where = f"'{name}' in {source}"
    if _KEY_WORDS.search(message) and _UPSTREAM.search(message) and not _OWN_KEY.search(message):
        return (f"The router at {base_url} was refused by the provider behind it: the key the ROUTER holds for "
                f"that provider is wrong or lacks access (your key{f' in ${key_env}' if key_env else ''} was "
                f"accepted). Fix: correct the provider key in the router's own configuration (LiteLLM: "
                f"litellm_params.api_key of the deployment serving '{model}'), then rerun.")
    if _OWN_KEY.search(message) or (status in (401, 403) and not _MODEL.search(message)) \
            or (status == 400 and _KEY_WORDS.search(message) and not _MODEL.search(message)):
        var = f"${key_env}" if key_env else "the key (this entry names no api_key_env)"
        return (f"The server refused the key in {var}{f' (HTTP {status})' if status != 401 else ''}. "
                f"Fix: export the key this server issued (a router's own key, not a provider's) as "
                f"{key_env or 'the api_key_env of ' + where}.")
    if _MODEL.search(message):
        return (f"The server does not serve model '{model}'. Fix: set model of {where} to a name the server "
                f"lists (GET {str(base_url or '').rstrip('/')}/models; a router lists its model_name entries).")
    if status == 404:  # no such route, or a model the server names no further
        return (f"Fix: check model '{model}' (GET {str(base_url or '').rstrip('/')}/models lists the names the "
                f"server serves) and base_url of {where} (it usually ends in /v1).")
    if status in (400, 422):
        return f"Fix: check model '{model}' and the params of {where}."
    return ""
