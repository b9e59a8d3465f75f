package main

// The time zones that rules files name (time_intervals, daily_summary) and
// RELAY_UPSTREAM_TZ are built in, so that relay needs no zone database on
// the machine, as in a scratch image.
import _ "time/tzdata"
