// Package all links every stage into a binary: importing it runs each stage
// package's init, which registers the stage with pipeline.Register. Add one
// blank import per stage package, sorted.
package all

import (
	_ "sendstream/stages/analytics"       // events to ClickHouse
	_ "sendstream/stages/delivery"        // transactional email to the provider
	_ "sendstream/stages/goals"           // goals, activity, EVENT_RECORDED, journey hand-off
	_ "sendstream/stages/journeylog"      // journey starts, steps, completions, exits, conversions to ClickHouse
	_ "sendstream/stages/journeymatch"    // journey starts from events and list joins, conversions, journey webhooks
	_ "sendstream/stages/journeys"        // journey executions: steps, waits, sends
	_ "sendstream/stages/messagelog"      // transactional status changes to ClickHouse
	_ "sendstream/stages/optin"           // double opt-in confirmation emails
	_ "sendstream/stages/pageviews"       // website page views to ClickHouse
	_ "sendstream/stages/requestlog"      // request log to ClickHouse
	_ "sendstream/stages/webhookdelivery" // outgoing webhooks sent, one attempt log row each
	_ "sendstream/stages/webhookfanout"   // domain events to webhook deliveries
	_ "sendstream/stages/webhooklog"      // webhook delivery log and bodies to ClickHouse
)
