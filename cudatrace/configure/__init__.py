"""Configure the ZLUDA runtime mapping of a program (``cudatrace configure``) and check the AMD runtime
(``cudatrace doctor``).

Modules: :mod:`.layout` recognizes ZLUDA and HIP SDK / ROCm folders by their files, :mod:`.evidence` gathers
what the program needs, :mod:`.mapping` plans which ZLUDA file serves which library with which environment,
:mod:`.launcher` writes the bash / PowerShell launcher, :mod:`.stage` applies and restores a plan with hash
proofs, :mod:`.environment` gives ``cudatrace run --zluda`` its environment, :mod:`.gpu` and :mod:`.doctor`
diagnose the machine.
"""
