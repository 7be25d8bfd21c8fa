SELECT currentDatabase()
