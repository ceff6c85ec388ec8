"""apispec.py - checks the lock API's answers against docs/openapi.json.

harness.http_request() hands every answer to a target under /_fence/v1/
to check(); a mismatch raises AssertionError, so the test that got the
answer fails, naming the request, the status and what did not match. The
document is read, its references inlined and each response's schema
compiled once per process, on first use (the suite makes about 100k
requests; a check is then a dictionary lookup and one validation).

What is checked, from the document alone: the path item the target
matches (a listed path, else the document's x-fencegate-other-paths);
the operation of the method (else the path item's
x-fencegate-other-methods); that the status is one the operation lists;
the response headers it marks required, and the value of any header it
describes with a schema; the media type against the response's content;
and, for a JSON answer to anything but HEAD, the body against the schema.
An error body is judged by the branch its `error` names (the
discriminator), so an unknown code is reported as such. Answers that are
not JSON (the metrics' text, HTML of the HTTP layer, 204, HEAD) are
checked for status, headers and media type only.

jsonschema is Debian's python3-jsonschema (scripts/install-deps.sh). The
suite may run under a python3 that is not /usr/bin/python3 and lacks
Debian's modules: then jsonschema and what it imports are loaded from
Debian's dist-packages directory, which is on sys.path only for that
import, so that no other module of the run resolves differently than it
would without it (less risky than running the whole suite under another
interpreter). Neither found is a failure of the setup, never a skip.
"""

import copy
import json
import os
import sys
import threading

DOC_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        "..", "..", "docs", "openapi.json")
DEBIAN_DIST = "/usr/lib/python3/dist-packages"
PREFIX = "/_fence/v1/"
METHODS = ("get", "put", "post", "delete", "options", "head", "patch",
           "trace")

_lock = threading.Lock()
_state = {}     # "doc", "jsonschema", "validators": {(path, method, status)}


def _import_jsonschema():
    try:
        import jsonschema
        return jsonschema
    except ImportError:
        pass
    if not os.path.isdir(DEBIAN_DIST):
        raise ImportError("jsonschema is not installed (Debian: "
                          "python3-jsonschema, scripts/install-deps.sh)")
    sys.path.append(DEBIAN_DIST)
    try:
        import jsonschema
        return jsonschema
    finally:
        sys.path.remove(DEBIAN_DIST)


def _resolve(doc, node, seen=()):
    """node with every local $ref replaced by what it names (the document
    has no cycles); siblings of a $ref are kept beside it under allOf."""
    if isinstance(node, list):
        return [_resolve(doc, x, seen) for x in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node and isinstance(node["$ref"], str):
        r = node["$ref"]
        if not r.startswith("#/") or r in seen:
            raise ValueError("docs/openapi.json: unsupported $ref %r" % r)
        target = doc
        for part in r[2:].split("/"):
            target = target[part.replace("~1", "/").replace("~0", "~")]
        target = _resolve(doc, target, seen + (r,))
        rest = {k: v for k, v in node.items() if k != "$ref"}
        if not rest:
            return target
        return {"allOf": [target], **_resolve(doc, rest, seen)}
    return {k: _resolve(doc, v, seen) for k, v in node.items()}


def _load():
    if "doc" in _state:
        return _state
    with _lock:
        if "doc" in _state:
            return _state
        js = _import_jsonschema()
        with open(DOC_PATH, "rb") as f:
            raw = json.loads(f.read().decode("utf-8"))
        js.Draft202012Validator.check_schema(
            {"$defs": raw["components"]["schemas"]})
        doc = copy.deepcopy(raw)
        doc["paths"] = _resolve(raw, raw["paths"])
        doc["x-fencegate-other-paths"] = _resolve(
            raw, raw["x-fencegate-other-paths"])
        _state.update(jsonschema=js, validators={})
        _state["doc"] = doc
    return _state


def document():
    """The document as a dict, references inlined."""
    return _load()["doc"]


def _operation(doc, method, path):
    """(template, operation) for a request path under /_fence/v1/."""
    paths = doc["paths"]
    if path in paths and "{" not in path:
        item, template = paths[path], path
    elif path.startswith(PREFIX + "locks/"):
        template = PREFIX + "locks/{name}"
        item = paths[template]
    else:
        return "(other paths)", doc["x-fencegate-other-paths"]
    m = method.lower()
    if m in METHODS and m in item:
        return template, item[m]
    return template + " (other methods)", item["x-fencegate-other-methods"]


def _media(ctype):
    return (ctype or "").split(";", 1)[0].strip().lower()


def _validator(st, key, schema):
    v = st["validators"].get(key)
    if v is None:
        v = st["jsonschema"].Draft202012Validator(schema)
        st["validators"][key] = v
    return v


def _where(err):
    return "$" + "".join("[%r]" % p if isinstance(p, int) else "." + str(p)
                         for p in err.absolute_path)


def _body_problem(st, key, schema, body):
    """None, or what is wrong with body against schema."""
    disc = schema.get("discriminator") if isinstance(schema, dict) else None
    if disc and isinstance(body, dict):
        prop = disc["propertyName"]
        branches = {}
        for b in schema.get("oneOf", ()):
            const = b.get("properties", {}).get(prop, {}).get("const")
            branches[const] = b
        if body.get(prop) not in branches:
            return ("%s %r is not one the document lists here (%s)"
                    % (prop, body.get(prop), ", ".join(sorted(branches))))
        schema = branches[body[prop]]
        key = key + (body[prop],)
    v = _validator(st, key, schema)
    errors = list(v.iter_errors(body))
    if not errors:
        return None
    best = st["jsonschema"].exceptions.best_match(errors)
    return "%s: %s" % (_where(best), best.message)


def problem(method, target, status, headers, body):
    """None when the answer matches the document; else what does not.
    headers: a list of (name, value); body: bytes."""
    path = target.split("?", 1)[0]
    if not path.startswith(PREFIX):
        return None
    st = _load()
    template, op = _operation(st["doc"], method, path)
    responses = op["responses"]
    resp = responses.get(str(status)) or \
        responses.get("%dXX" % (status // 100)) or responses.get("default")
    if resp is None:
        return ("status %d is not one the document lists for %s %s (it "
                "lists %s)" % (status, method, template,
                               ", ".join(sorted(responses))))
    have = {}
    for k, v in headers:
        have.setdefault(k.lower(), v)
    for name, h in resp.get("headers", {}).items():
        value = have.get(name.lower())
        if value is None:
            if h.get("required"):
                return "required header %s is missing" % name
            continue
        if "schema" in h:
            v = _validator(st, (template, method, status, "h", name),
                           h["schema"])
            if not v.is_valid(value):
                return "header %s: %r does not match %s" % (
                    name, value, json.dumps(h["schema"]))
    content = resp.get("content")
    if not content:
        if body:
            return "a %d answer with a body (%d bytes); the document lists " \
                   "none" % (status, len(body))
        return None
    media = _media(have.get("content-type"))
    if media not in content:
        return "Content-Type %r is not one the document lists (%s)" % (
            have.get("content-type"), ", ".join(sorted(content)))
    if method.upper() == "HEAD" or media != "application/json":
        return None
    try:
        parsed = json.loads(body.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        return "the body is not JSON (%s): %r" % (e, body[:200])
    schema = content[media].get("schema")
    if schema is None:
        return None
    return _body_problem(st, (template, method, status), schema, parsed)


def check(method, target, status, headers, body):
    """Raises AssertionError when the answer does not match the document."""
    p = problem(method, target, status, headers, body)
    if p is not None:
        raise AssertionError(
            "the answer to %s %s does not match docs/openapi.json: status "
            "%d: %s; body: %r" % (method, target[:200], status, p,
                                 body[:300]))
