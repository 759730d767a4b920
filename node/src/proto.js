'use strict';
// The one contract, proto/wirelab/v1/wirelab.proto, loaded at run time with @grpc/proto-loader
// (no generated code to drift; test/proto.test.js holds the loaded service to the file's methods);
// replies are encoded with protobufjs, canonically (see canonical).
const protoLoader = require('@grpc/proto-loader');
const protobuf = require('protobufjs');
const { PROTO, PROTO_ROOT } = require('./paths');

const SERVICE = 'wirelab.v1.WireLab';
// Field names as the proto spells them (the REST JSON uses them too); 64-bit integers as decimal
// strings, so no value past 2^53 is rounded; unset fields read as their defaults.
const OPTIONS = { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true, includeDirs: [PROTO_ROOT] };

function load() {
  return protoLoader.loadSync('wirelab/v1/wirelab.proto', OPTIONS);
}

function isDefault(value) {
  if (value === 0 || value === '' || value === false) return true;
  if (value instanceof Uint8Array) return value.length === 0;
  return protobuf.util.Long.isLong(value) && value.isZero();
}

/** Drop the scalar fields that hold their default, through nested messages: proto3 leaves them
 * off the wire, as Python's protobuf does, where protobufjs writes every field that is set
 * (a StreamMessage with seq 0 was 14 bytes here and 12 from Python; an echoed order 12 more). */
function canonical(type, message) {
  for (const field of type.fieldsArray) {
    const value = message[field.name];
    if (value === undefined || value === null) continue;
    const nested = field.resolvedType instanceof protobuf.Type ? field.resolvedType : null;
    if (field.map) {
      if (nested) for (const v of Object.values(value)) canonical(nested, v);
    } else if (field.repeated) {
      if (nested) for (const v of value) canonical(nested, v);
    } else if (nested) {
      canonical(nested, value);
    } else if (isDefault(value)) {
      delete message[field.name];
    }
  }
  return message;
}

let ROOT = null;

function root() {
  if (ROOT === null) {
    ROOT = new protobuf.Root().loadSync(PROTO, { keepCase: true });
    ROOT.resolveAll();
  }
  return ROOT;
}

function encoderFor(type) {
  return (object) => Buffer.from(type.encode(canonical(type, type.fromObject(object))).finish());
}

// Strings as Python's protobuf reads them: bytes that are not UTF-8 fail the message (protobufjs
// would put U+FFFD in their place and take it); a BOM is a character like any other.
const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

class StrictReader extends protobuf.BufferReader {
  string() {
    return UTF8.decode(this.bytes());
  }
}

function decoderFor(type) {
  return (raw) => type.toObject(type.decode(new StrictReader(raw)), OPTIONS);
}

/** method name -> (request bytes) -> the request as a plain object (OPTIONS' shape, as
 * proto-loader gives it); throws on bytes that are not the message, invalid UTF-8 included. */
function decoders() {
  const found = {};
  for (const method of root().lookupService(SERVICE).methodsArray) {
    found[method.name] = decoderFor(method.resolvedRequestType);
  }
  return found;
}

/** method name -> (plain object with proto field names) -> its reply's canonical protobuf bytes. */
function encoders() {
  const found = {};
  for (const method of root().lookupService(SERVICE).methodsArray) {
    found[method.name] = encoderFor(method.resolvedResponseType);
  }
  return found;
}

/** (plain object) -> canonical protobuf bytes of the contract's message ``name`` (a relay's
 * requests: hops.js). */
function encoderOf(name) {
  return encoderFor(root().lookupType(`${SERVICE.split('.').slice(0, -1).join('.')}.${name}`));
}

module.exports = { SERVICE, OPTIONS, decoders, encoderOf, encoders, load };
