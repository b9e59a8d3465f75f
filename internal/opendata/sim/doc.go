// Package sim is an HTTP simulator of the energy-monitoring Open Data Service
// (docs/design.md §3 says what the vendor's interface leaves open). The
// relay's client, poller and demo are tested against it, so it is strict
// where the spec is clear and deliberately varied where the spec allows more
// than one shape.
//
// A Server generates a seedable fleet (tenant, stations, systems, devices, some
// of them shared from another tenant), serves all eleven endpoints, and keeps
// an alarm engine. All time comes from the clock in Options, so runs on a fake
// clock are deterministic.
//
// # Answers
//
// Every answer is the common envelope {code, description, data} with HTTP 200,
// unless Options.HTTPErrors asks for matching HTTP statuses. A request that is
// not a POST gets HTTP 405, an unknown path HTTP 404, a body that is not JSON
// (Content-Type other than application/json) HTTP 415 with code A0400.
//
// Login returns the token in a TOKEN header and in data.accessToken, with
// expiresIn as a string of seconds and scope "tenantId:<id>". Data endpoints
// take it as "Authorization: <token>" or "Authorization: Bearer <token>".
// Ids and epoch-millisecond times are strings or numbers (Options.IDs,
// Options.Timestamps); the two device lists put their array in data, or in
// data.dataList with Options.DeviceListInDataList.
//
// getAlarmList returns ongoing alarms (status 1) for isRecovery=false and
// ended (0) and invalid (-1) ones for isRecovery=true. startTime and endTime
// filter on the occurrence time, inclusive. Records come newest occurrence
// first, then by originId descending, so pages are stable while nothing
// changes. An ongoing record has null recoveryTime, recoveryTimeStr and
// durationTp. Alarm records carry the token's tenant, also for devices shared
// from another tenant.
//
// # Alarms
//
// Tests start and end alarms directly (StartAlarm, EndAlarm, InvalidateAlarm,
// Storm, Backfill), script them (Schedule: start and end at given simulated
// times, applied once the clock has passed them) or let Churn run. Scheduled
// and churned alarms take effect lazily, on the next request or alarm method
// call, or on Tick.
//
// # Faults
//
// InjectFault queues a Fault per endpoint (or AnyEndpoint): server errors,
// the C0001 envelope, malformed or truncated bodies, delays, rate-limit and
// expired-token answers, and a paging glitch that drops one record from the
// next getAlarmList page. Each fault applies to its Count requests that pass
// the rate limit.
//
// # Error codes
//
//	C0001  login with a wrong appId or appSecret (with errorMsg "authentication
//	       failed" and errorKey "be_ErrorCode_C0001"); also the injected
//	       FaultEnvelope answer.
//	A0230  the token has expired (TokenTTL after its login, 4 h by default).
//	A0301  the Authorization header is missing, or names no token issued here.
//	A0400  a required parameter is missing or has the wrong type: a body that
//	       is not a JSON object, getAlarmList without current, size, startTime
//	       or endTime, getStationDetail or getStationDeviceList without
//	       stationId, an empty id list where one is required, a missing
//	       dimension, a date not written yyyy-MM-dd, identityCode sent to
//	       device history, a grantType other than client_credentials.
//	A0410  a value outside its allowed range: current < 1, size outside
//	       1..500, startTime after endTime, an eventLevel outside 0..3, an
//	       unknown device type, assetScope outside 0..2, isGetFirmwareVersion
//	       outside 0/1, an unknown identityCode, more than 100 real-time nodes
//	       or more than 50 history ids, an unknown stationId in getStationDetail.
//	A0420  a date range the dimension does not allow: an unknown dimension,
//	       endDate before startDate, more than 31 days for day, more than 12
//	       months for month.
//	A0501  too many requests from this IP (RateLimit per Window). With
//	       HTTPErrors the answer is HTTP 429; both forms carry Retry-After.
//
// Ids and numbers in requests are accepted as JSON numbers or numeric strings,
// as a Java service would coerce them; unknown request fields are ignored.
// Unknown ids in history and real-time requests are left out of the answer,
// not refused.
//
// # Rate limit
//
// The limit is a sliding window on arrivals per remote IP: a request is refused
// when RateLimit requests from its IP were admitted in the Window before it.
// Refused requests are not served and do not fill the window. With
// Options.Spacing the limiter also refuses a data request that follows the
// one admitted before it sooner than that (logins excepted). Every arrival,
// admitted or not, is counted in Stats and recorded for MaxArrivals.
//
// A Host serves several accounts (Servers of their own, each with its
// credentials, fleet and alarms) at one address, and counts the limit per
// IP across all of them, as the real service does: the tenants of one
// upstream host polled from one egress address share its 10 requests a
// minute.
package sim
