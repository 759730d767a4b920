'use strict';
// Where the lab's shared files are: this runtime reads them as they are, never a copy.
const path = require('node:path');

// Read here, not through settings.js: this is what finds the knob table (contract/knobs.json).
const ROOT = process.env.WIRELAB_ROOT || path.resolve(__dirname, '..', '..');

module.exports = {
  ROOT,
  PROTO: path.join(ROOT, 'proto', 'wirelab', 'v1', 'wirelab.proto'),
  PROTO_ROOT: path.join(ROOT, 'proto'),
  CONTRACT: path.join(ROOT, 'contract', 'metrics.json'),
  KNOBS_FILE: path.join(ROOT, 'contract', 'knobs.json'),
};
