package console

// registerDeadLetters adds the DeadLetters page's routes (issue 27: not built yet).
func (c *Console) registerDeadLetters() {}
