'use strict';
// The one contract, proto/wirelab/v1/wirelab.proto, loaded at run time with @grpc/proto-loader
// (no generated code to drift; test/proto.test.js holds the loaded service to the file's methods).
const protoLoader = require('@grpc/proto-loader');
const { PROTO_ROOT } = require('./paths');

const SERVICE = 'wirelab.v1.WireLab';
// Field names as the proto spells them (the REST JSON uses them too); 64-bit integers as decimal
// strings, so no value past 2^53 is rounded; unset fields read as their defaults.
const OPTIONS = { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true, includeDirs: [PROTO_ROOT] };

function load() {
  return protoLoader.loadSync('wirelab/v1/wirelab.proto', OPTIONS);
}

module.exports = { SERVICE, OPTIONS, load };
