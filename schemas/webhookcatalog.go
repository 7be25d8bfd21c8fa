package schemas

import (
	"encoding/json"
	"strings"
)

// The built-in webhook event types: every type spec 6 names, with the
// payloads it gives, and the ones users of the platform expect (contact,
// list, event, goal and transactional lifecycle). Field names follow the
// payload structs of this package (ContactPayload, ListMembershipPayload,
// ContactConfirmedPayload, EventRecordedData, MessageEventData,
// EmailBouncedData, EmailComplainedData).
func init() {
	for _, e := range append(builtinWebhookEvents(), journeyWebhookEvents()...) {
		RegisterWebhookEvent(e)
	}
}

// JSON Schema fragments of payload properties, shared by several types.
const (
	whContactID  = `"contactId":{"type":"string","description":"The contact's id."}`
	whEmail      = `"email":{"type":"string","description":"The contact's or recipient's email address, trimmed and lower-cased."}`
	whListID     = `"listId":{"type":"string","description":"The list's id."}`
	whListName   = `"listName":{"type":"string","description":"The list's name."}`
	whOccurredAt = `"occurredAt":{"type":"string","format":"date-time","description":"When it happened (ISO 8601, UTC)."}`
	whMessageID  = `"messageId":{"type":"string","description":"The service's message id: the id the send call answered with, usable with GET /v1/transactional/{messageId}/status."}`
	whRFCID      = `"rfcMessageId":{"type":"string","description":"The Message-ID header of the email, without angle brackets."}`
	whExternalID = `"externalId":{"type":"string","description":"The caller's externalId, when the call sent one."}`
	whProvider   = `"provider":{"type":"string","description":"The email provider plugin that handled the message (e.g. smtp)."}`
	whNullStr    = `{"type":["string","null"]}`
)

// whContactFields are the properties of ContactPayload.
var whContactFields = []string{
	whContactID, whEmail,
	`"firstName":` + whNullStr, `"country":` + whNullStr, `"language":` + whNullStr,
	`"status":{"type":"string","enum":["ACTIVE","UNSUBSCRIBED","BOUNCED","COMPLAINED","PENDING"]}`,
	`"source":` + whNullStr,
	`"customFields":{"type":"object","description":"Custom field key to value."}`,
	`"metadata":{"type":["object","null"]}`,
	`"createdAt":{"type":"string","format":"date-time"}`,
	`"updatedAt":{"type":"string","format":"date-time"}`,
}

// whMembershipFields are the properties of ListMembershipPayload.
var whMembershipFields = []string{
	whContactID, whEmail, whListID, whListName,
	`"status":{"type":"string","enum":["ACTIVE","UNSUBSCRIBED","PENDING"],"description":"The membership's status after the change."}`,
	`"via":{"type":"string","enum":["api","form","confirmation"],"description":"What moved the membership."}`,
}

// whEventFields are the properties of EventRecordedData.
var whEventFields = []string{
	`"eventId":{"type":"string","description":"The event's id (the id POST /v1/events answered with)."}`,
	`"event":{"type":"string","description":"The event name."}`,
	whContactID, whEmail,
	`"goalType":{"type":"string","enum":["purchase","subscription","lead","signup","booking","trial","other"]}`,
	`"value":{"type":"number","description":"The goal's value; negative for a refund."}`,
	`"currency":{"type":"string","description":"ISO 4217 code, upper case."}`,
	whExternalID, whOccurredAt,
	`"properties":{"type":"object","description":"The event's properties as sent."}`,
}

// whMessageFields are the properties of MessageEventData.
var whMessageFields = []string{whMessageID, whRFCID, whEmail, whExternalID, whProvider, whOccurredAt}

// whObject returns the JSON Schema of an object with the given properties,
// of which the required ones must be present. No additionalProperties
// restriction: receivers must ignore members they do not know, so new
// members can be added without a new version.
func whObject(required []string, props ...string) json.RawMessage {
	req, _ := json.Marshal(required)
	return json.RawMessage(`{"type":"object","required":` + string(req) + `,"properties":{` + strings.Join(props, ",") + `}}`)
}

func with(base []string, more ...string) []string {
	return append(append([]string(nil), base...), more...)
}

func builtinWebhookEvents() []WebhookEvent {
	contactReq := []string{"contactId", "email", "status", "customFields", "createdAt", "updatedAt"}
	memberReq := []string{"contactId", "email", "listId", "listName", "status"}
	eventReq := []string{"eventId", "event", "contactId", "occurredAt"}
	msgReq := []string{"messageId", "email", "provider", "occurredAt"}
	return []WebhookEvent{
		{Name: "CONTACT_CREATED", Description: "A contact was created: by POST /v1/contacts, by POST /v1/lists/{id}/subscribe for a new address, or by a hosted sign-up form.",
			Data: whObject(contactReq, whContactFields...)},
		{Name: "CONTACT_UPDATED", Description: "POST /v1/contacts changed at least one field of an existing contact; updatedFields names what changed.",
			Data: whObject(append(contactReq, "updatedFields"), with(whContactFields,
				`"updatedFields":{"type":"array","items":{"type":"string"},"description":"What changed, e.g. firstName or customFields.plan."}`)...)},
		{Name: WebhookContactUnsubscribed, Description: "The contact's own status became UNSUBSCRIBED: the recipient used the unsubscribe link of a marketing email (its page or the one-click POST), which stops marketing email to the address. Fired once, when the status changes; an address with no contact fires nothing. A spam complaint does not fire it (the status becomes COMPLAINED and EMAIL_COMPLAINED fires), nor does leaving one list (CONTACT_REMOVED_FROM_LIST).",
			Data: whObject([]string{"contactId", "email", "occurredAt"}, whContactID, whEmail, whOccurredAt)},
		{Name: "CONTACT_CONFIRMED", Description: "A double opt-in click moved the contact itself from PENDING to ACTIVE.",
			Data: whObject([]string{"contactId", "email"}, whContactID, whEmail)},
		{Name: "CONTACT_ADDED_TO_LIST", Description: "A membership became ACTIVE through POST /v1/lists/{id}/subscribe or a sign-up form of a list without double opt-in.",
			Data: whObject(memberReq, whMembershipFields...)},
		{Name: "CONTACT_REMOVED_FROM_LIST", Description: "A membership became UNSUBSCRIBED (POST /v1/lists/{id}/unsubscribe); the row is kept.",
			Data: whObject(memberReq, whMembershipFields...)},
		{Name: "LIST_SUBSCRIPTION_CONFIRMED", Description: "A double opt-in click activated a PENDING membership; one per list activated.",
			Data: whObject(memberReq, whMembershipFields...)},
		{Name: "EVENT_RECORDED", Description: "A recorded event (POST /v1/events, /v1/events/import or /public/events) matched a contact. Events that match no contact fire nothing.",
			Data: whObject(eventReq, whEventFields...)},
		{Name: WebhookGoalRecorded, Description: "A recorded event carrying a goalType matched a contact (it also fires EVENT_RECORDED).",
			Data: whObject(append(eventReq, "goalType"), whEventFields...)},
		{Name: "TRANSACTIONAL_SENT", Description: "The email provider accepted a transactional message (status sent).",
			Data: whObject(msgReq, whMessageFields...)},
		{Name: "EMAIL_DELIVERED", Description: "The provider reported delivery of a message (status delivered).",
			Data: whObject(msgReq, whMessageFields...)},
		{Name: "EMAIL_BOUNCED", Description: "The provider reported a bounce (status bounced). A hard bounce suppresses the address.",
			Data: whObject([]string{"email", "messageId", "provider", "type", "reason", "occurredAt"},
				whEmail, whMessageID, whProvider,
				`"type":{"type":"string","enum":["hard","soft"],"description":"hard: the address is suppressed; soft: a temporary failure."}`,
				`"reason":{"type":"string","description":"The provider's bounce reason."}`,
				whOccurredAt, whRFCID, whExternalID)},
		{Name: "EMAIL_COMPLAINED", Description: "The recipient marked a message as spam (status complained); the address is suppressed.",
			Data: whObject([]string{"email", "messageId", "provider", "type", "occurredAt"},
				whEmail, whMessageID, whProvider,
				`"type":{"type":"string","description":"The feedback type the provider reported (e.g. abuse), or complaint."}`,
				whOccurredAt, whRFCID, whExternalID)},
		{Name: WebhookTransactionalFailed, Description: "A transactional message failed (status failed): the provider refused it, its hand-off had an unknown outcome (not retried, to avoid sending twice), no provider could take it, or it could not be built. Not fired for a temporary failure that is retried.",
			Data: whObject([]string{"messageId", "email", "provider", "reason", "occurredAt"},
				whMessageID, whRFCID, whEmail, whExternalID, whProvider,
				`"reason":{"type":"string","description":"Why the message failed."}`, whOccurredAt)},
	}
}
