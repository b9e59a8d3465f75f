package console

// registerSystem adds the System page's routes (issue 27: not built yet).
func (c *Console) registerSystem() {}
