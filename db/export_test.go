package db

// What the tests of the open-batch probes run and check the plans of.
var (
	MarkFreshQuery = markFreshQuery
	SealQuery      = sealQuery
	OpenBatchArgs  = openBatchArgs
	ListPlan       = listPlan
	PinnedDays     = pinnedDays
)

// The conditions the feed's and mark-read's statements are written with,
// for tests that keep a frozen copy of an older statement.
const (
	AnyNotificationCond = anyNotification
	UnreadCond          = unread
	NotUnreadCond       = notUnread
	AnyBatchCond        = anyBatch
)
