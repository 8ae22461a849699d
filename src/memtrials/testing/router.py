"""Router replies for the loopback server (``LoopbackServer(router=...)``): what a LiteLLM
proxy in front of a model server sends back, for tests of how the client reads them.

The shapes follow the LiteLLM proxy's replies as its users report them (an OpenAI-style
``{"error": {"message", "type", "param", "code"}}`` body; the provider's own error nested in
the message after ``<Provider>Exception -``; the ``x-litellm-*`` response headers); the
texts are written here, not copied.  Each refusal is ``(status, body)``.
"""

from __future__ import annotations

from typing import Any


def _error(message: str, code: int, kind: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": str(code)}}


# the proxy refuses the client's own (virtual) key, answering 400 rather than 401
OWN_KEY_400 = (400, _error("Authentication Error, Invalid proxy server token passed. Received API Key = "
                           "sk-...wxyz. Unable to find token in cache or LiteLLM_VerificationTokenTable", 400,
                           "auth_error"))
# the proxy accepted the client's key, but the provider behind it refused the key the proxy holds
UPSTREAM_KEY_401 = (401, _error("litellm.AuthenticationError: AuthenticationError: OpenAIException - Error code: "
                                "401 - {'error': {'message': 'Incorrect API key provided: sk-up...1234.', "
                                "'type': 'invalid_request_error', 'code': 'invalid_api_key'}}", 401))
# the same wrapped as a server error (older proxies): not worth retrying either
UPSTREAM_KEY_500 = (500, _error("litellm.AuthenticationError: AuthenticationError: OpenAIException - The api_key "
                                "client option must be set either by passing api_key to the client or by setting "
                                "the OPENAI_API_KEY environment variable", 500))
# a model name the proxy does not route
UNKNOWN_MODEL_400 = (400, _error("/chat/completions: Invalid model name passed in model=no-such-model. "
                                 "Call `/v1/models` to view available models for your key.", 400))
# a plain OpenAI-compatible server's unknown model
UNKNOWN_MODEL_404 = (404, _error("The model `no-such-model` does not exist or you do not have access to it.", 404,
                                 "invalid_request_error"))


def litellm_headers(model: str, api_base: str, *, fallbacks: int = 0, cost: float | None = None) -> dict[str, str]:
    """The ``x-litellm-*`` headers of one answered request."""
    headers = {"x-litellm-model-name": model, "x-litellm-model-api-base": api_base,
               "x-litellm-model-id": "d3adb33f", "x-litellm-attempted-fallbacks": str(fallbacks),
               "x-litellm-attempted-retries": "0"}
    if cost is not None:
        headers["x-litellm-response-cost"] = repr(cost)
    return headers
