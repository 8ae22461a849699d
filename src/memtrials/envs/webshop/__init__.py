"""WebShop (Yao et al. 2022), the 1,000-product setting, offline: data, search, reward.

* :mod:`.data` -- the shipped files in ``data/webshop/`` (xz + SHA-256 check);
* :mod:`.catalog` -- products, environment prices and the 6,910 synthetic goals, as upstream
  builds them (:func:`~memtrials.envs.webshop.catalog.load_catalog`);
* :mod:`.search` -- the BM25 search engine the results pages show;
* :mod:`.reward` -- upstream's purchase reward, quirks kept;
* :mod:`.pages`, :mod:`.engine` -- the text environment (pages, actions, transitions) as upstream's
  answers them;
* :mod:`.env` -- :class:`~memtrials.envs.webshop.env.WebShopEnv`, the :class:`~memtrials.envs.base.Env`;
* :mod:`.splits` -- the task table's rows (splits, categories, ``capped``).

Nothing is imported here: importing the package loads no data.
"""
