package schemas

// Topic names of the pipeline. Deployments may prefix them (see the
// SENDSTREAM_TOPIC_PREFIX setting); code always names them by these constants.
const (
	TopicRequestLog    = "sendstream.requestlog.v1"    // one envelope per authenticated API call
	TopicEvents        = "sendstream.events.v1"        // recorded events and goals
	TopicPageViews     = "sendstream.pageviews.v1"     // anonymous website analytics beacons
	TopicContacts      = "sendstream.contacts.v1"      // contact and membership changes
	TopicOptIn         = "sendstream.optin.v1"         // double opt-in confirmation emails to send
	TopicTransactional = "sendstream.transactional.v1" // accepted sends awaiting delivery
	TopicMessageStatus = "sendstream.messagestatus.v1" // status changes of transactional messages (message log)
	TopicWebhooks      = "sendstream.webhooks.v1"      // workspace events to fan out to subscribers
	TopicDeadLetter    = "sendstream.deadletter.v1"    // envelopes a stage gave up on
)

// AllTopics lists every topic the pipeline uses, for creation at start-up.
var AllTopics = []string{
	TopicRequestLog, TopicEvents, TopicPageViews, TopicContacts, TopicOptIn,
	TopicTransactional, TopicMessageStatus, TopicWebhooks, TopicWebhookDeliveries,
	TopicWebhookAttempts, TopicJourneys, TopicJourneySteps, TopicDeadLetter,
}
