// Package e2e holds relay's end-to-end and reliability tests
// (docs/design.md §13). Each test builds the relay binary once, runs it as a
// separate process configured only by RELAY_* environment variables, and drives it
// against real components in the test process: the Open Data Service
// simulator, an embedded NATS server with JetStream, a fake Slack Web API and
// a webhook receiver that checks Standard Webhooks signatures. The tests kill
// the process, take its sinks away and fill its upstream with faults, and then
// check every delivery against what the simulator's alarm history implies.
//
// The tests take about a minute and a half on two cores and are skipped with
// -short.
package e2e
