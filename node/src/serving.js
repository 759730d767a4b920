'use strict';
// Process plumbing both Node services share (services/wirelab/serving.py): settings, the metrics
// port, loud failures to listen, and the SIGTERM drain.
const settingsModule = require('./settings');
const { instruments } = require('./metrics');
const { startServer } = require('./exposition');

function fail(prog, message, code) {
  console.error(`${prog}: ${message}`);
  process.exit(code);
}

/** Settings, metrics and the /metrics server, or exit non-zero with one line saying why. */
async function prepare(prog, protocol, concurrency) {
  let settings;
  try {
    settings = settingsModule.load();
  } catch (exc) {
    fail(prog, exc.message, 2);
  }
  const metrics = instruments(settings, protocol, concurrency);
  let metricsServer;
  try {
    metricsServer = await startServer(settings.host, settings.metricsPort, metrics && metrics.registry);
  } catch (exc) {
    fail(prog, `cannot listen for metrics on ${settings.host}:${settings.metricsPort}: ${exc.message}`, 1);
  }
  return { settings, metrics, metricsServer };
}

/** On SIGTERM or SIGINT: ``drain()`` (bounded by the grace period inside it), then exit 0. */
function onTerm(prog, metricsServer, drain) {
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    await drain();
    metricsServer.close();
    metricsServer.closeAllConnections();
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

module.exports = { fail, onTerm, prepare };
