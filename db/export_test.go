package db

// What the tests of the open-batch probes run and check the plans of.
var (
	MarkFreshQuery = markFreshQuery
	SealQuery      = sealQuery
	OpenBatchArgs  = openBatchArgs
	ListPlan       = listPlan
	PinnedDays     = pinnedDays
)
