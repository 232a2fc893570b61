package upgrade

import "github.com/polyaxon-deploy/polyaxon-deploy/installer/phase/phasetest"

// recorder keeps the pipeline's events and the fakes' calls in order.
type recorder struct{ phasetest.Recorder }

func (r *recorder) add(e string) { r.Add(e) }
