from bench.system.runner import main

main()
