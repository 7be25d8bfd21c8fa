package main

import (
	"sendstream/ingest"
	"sendstream/pipeline"
)

// featureRoutes lists the routes of every feature package beyond the core
// ones the ingest server always has.
func featureRoutes(cfg Config, res pipeline.Resources) []ingest.Route {
	var routes []ingest.Route
	return routes
}
