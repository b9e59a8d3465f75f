package console

// registerReport adds the Report page's routes (issue 27: not built yet).
func (c *Console) registerReport() {}
