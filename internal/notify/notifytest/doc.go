// Package notifytest holds the real, in-process counterparts of relay's sinks
// for tests: a fake Slack Web API that records what it is asked, fakes of the
// other vendors' APIs, an SMTP server, and a webhook receiver that checks
// Standard Webhooks signatures with its own implementation of the scheme.
// The embedded NATS server is internal/natstest's.
package notifytest
