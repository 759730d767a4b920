'use strict';
// What a REST request says before its body is read, read as uvicorn and FastAPI read it: the
// target's path and query, and the body's media type.

// An absolute-form target's scheme and authority (RFC 9112 section 3.2.2), which uvicorn drops.
const ABSOLUTE_FORM = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?]*/;

/** A request target as uvicorn reads it: without a fragment, or the scheme and authority of an
 * absolute form; the path percent-decoded (UTF-8, bytes that are not replaced), the query
 * string (``search``, with its `?`) and its parameters, never parsed as a URL. `new URL('//[',
 * base)` reads `//[` as an authority and throws, as it does for `//x:99999/`: one such request
 * ended the process. */
function target(raw) {
  const hash = raw.indexOf('#');
  const bare = (hash === -1 ? raw : raw.slice(0, hash)).replace(ABSOLUTE_FORM, '');
  const at = bare.indexOf('?');
  const path = at === -1 ? bare : bare.slice(0, at);
  const decoded = path.includes('%')
    ? path.replace(/(?:%[0-9A-Fa-f]{2})+/g, (run) => Buffer.from(run.replace(/%/g, ''), 'hex').toString('utf8'))
    : path;
  const search = at === -1 || at === bare.length - 1 ? '' : bare.slice(at);
  return { path: decoded, search, query: new URLSearchParams(search) };
}

/** A Content-Type's media type, lowercased, without parameters. */
function mediaType(req) {
  return (req.headers['content-type'] || '').split(';', 1)[0].trim().toLowerCase();
}

/** JSON as FastAPI tells it: application/json or application/<anything>+json. */
function isJson(media) {
  return media === 'application/json' || (media.startsWith('application/') && media.endsWith('+json'));
}

module.exports = { isJson, mediaType, target };
