package console

// registerHistory adds the History page's routes (issue 27: not built yet).
func (c *Console) registerHistory() {}
