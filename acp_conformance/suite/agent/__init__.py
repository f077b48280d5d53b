"""Agent certification: the suite plays the client against the agent under test."""
