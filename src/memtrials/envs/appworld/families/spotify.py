"""Spotify task families (a small catalogue of artists and songs, the supervisor's library and playlists).

======================  ========  ====  =======================================================
family                  answer    diff  instruction (variant values drawn from the seed)
======================  ========  ====  =======================================================
spot_playlist_count     number    1     how many playlists do I have
spot_like_song          none      1     like the song T by artist A
spot_longest_song       text      2     title of the longest song in my library
spot_playlist_size      number    2     how many songs are in my playlist P
spot_make_playlist      none      3     create playlist P holding songs S1, S2, S3 of my library
======================  ========  ====  =======================================================
"""

from __future__ import annotations

import random
from typing import Any, Callable

from memtrials.envs.appworld.cast import FRIENDS
from memtrials.envs.appworld.families.common import WORDS, changed, chore, dt, paged, question, user

ARTISTS = ["The Lanterns", "Mira Vale", "Northbound", "Otis Grey", "Saffron Kid", "Velvet Coast"]
GENRES = ["pop", "rock", "jazz", "indie", "folk"]
NOUNS = ["Rain", "Lights", "Road", "Summer", "Echoes", "River", "Stars", "Morning", "Fire", "Waves"]


def _catalogue(rng: random.Random, n: int) -> list[dict]:
    """``n`` songs with distinct titles and durations (seconds), each by one of :data:`ARTISTS`."""
    titles = rng.sample([f"{w.title()} {x}" for w in WORDS for x in NOUNS], n)
    durations = rng.sample(range(150, 420), n)
    return [{"title": t, "artist": rng.choice(ARTISTS), "duration": d} for t, d in zip(titles, durations)]


def _spotify_setup(songs: list[dict], library: list[str], playlists: dict[str, list[str]],
                   others: dict[str, list[str]] | None = None) -> Callable[[Any, dict], None]:
    """Songs in the catalogue; ``library`` titles in my library; my ``playlists`` and friends' ``others``."""
    def setup(models: Any, ctx: dict) -> None:
        sp = models.spotify
        when = dt("2023-05-05T20:00:00")
        artists = {name: sp.Artist.create_save(name=name, genre=GENRES[i % len(GENRES)], created_at=when)
                   for i, name in enumerate(sorted({s["artist"] for s in songs}))}
        ids = {}
        for i, s in enumerate(songs):
            a = artists[s["artist"]]
            ids[s["title"]] = sp.Song.create_save(title=s["title"], artist_ids=[a.id], duration=s["duration"],
                                                  release_date=dt(f"2020-0{1 + i % 9}-15T00:00:00"), genre=a.genre,
                                                  album_id=None).id
        me = user(models, "spotify")
        for title in library:
            sp.UserLibrarySong.create_save(user_id=me.id, song_id=ids[title], created_at=when)
        owners = [(me, playlists)] + [(user(models, "spotify", f["email"]), {k: v}) for f, (k, v)
                                      in zip(FRIENDS, (others or {}).items())]
        for owner, lists in owners:
            for title, members in lists.items():
                p = sp.Playlist.create_save(title=title, user_id=owner.id, created_at=when, is_public=True)
                for t in members:
                    sp.PlaylistSong.create_save(playlist_id=p.id, song_id=ids[t], added_at=when)
    return setup


def _playlists(rng: random.Random, songs: list[dict], n: int) -> dict[str, list[str]]:
    names = rng.sample([f"{w.title()} {x}" for w in WORDS for x in ("mix", "vibes", "favourites", "drive")], n)
    return {name: rng.sample([s["title"] for s in songs], rng.randint(1, min(6, len(songs)))) for name in names}


def spot_playlist_count(rng: random.Random) -> dict:
    songs = _catalogue(rng, 10)
    mine = _playlists(rng, songs, rng.randint(2, 7))
    others = _playlists(rng, songs, 3)
    others = {k: v for k, v in others.items() if k not in mine}
    return question("spotify", 1, answer=len(mine), setup=_spotify_setup(songs, [], mine, others),
                    instruction="How many playlists do I have in my Spotify playlist library?",
                    steps=paged("spotify.show_playlist_library(access_token=token)", "playlists"),
                    reply="len(playlists)", keeps="spotify.Playlist")


def spot_like_song(rng: random.Random) -> dict:
    songs = _catalogue(rng, rng.randint(8, 12))
    target = rng.choice(songs)
    return chore("spotify", 1, setup=_spotify_setup(songs, [s["title"] for s in songs[:4]], {}),
                 public={"title": target["title"]},
                 instruction=f"Like the song '{target['title']}' by {target['artist']} on Spotify.",
                 steps=paged(f"spotify.search_songs(query={target['title']!r}, access_token=token)", "found")
                 + f"sid = [s for s in found if s['title'] == {target['title']!r}][0]['song_id']\n"
                   "apis.spotify.like_song(song_id=sid, access_token=token)\n",
                 checks=changed("spotify.SongLike", "one added",
                                "exactly one song like is added, for the requested song")
                 + """\
    test.case(models.end.spotify.Song.find_one(id=added[0].song_id).title, "==", public_data.title)
""")


def spot_longest_song(rng: random.Random) -> dict:
    songs = _catalogue(rng, 12)
    library = rng.sample([s["title"] for s in songs], rng.randint(4, 9))
    answer = max((s for s in songs if s["title"] in library), key=lambda s: s["duration"])["title"]
    return question("spotify", 2, answer=answer, setup=_spotify_setup(songs, library, {}),
                    instruction="What is the title of the longest song in my Spotify song library?",
                    steps=paged("spotify.show_song_library(access_token=token)", "library"),
                    reply="max(library, key=lambda s: s['duration'])['title']", keeps="spotify.UserLibrarySong")


def spot_playlist_size(rng: random.Random) -> dict:
    songs = _catalogue(rng, 10)
    mine = _playlists(rng, songs, rng.randint(2, 5))
    name = rng.choice(sorted(mine))
    return question("spotify", 2, answer=len(mine[name]), setup=_spotify_setup(songs, [], mine),
                    instruction=f"How many songs are in my Spotify playlist '{name}'?",
                    steps=paged("spotify.show_playlist_library(access_token=token)", "playlists"),
                    reply=f"len([p for p in playlists if p['title'] == {name!r}][0]['song_ids'])",
                    keeps="spotify.PlaylistSong")


def spot_make_playlist(rng: random.Random) -> dict:
    songs = _catalogue(rng, 10)
    library = rng.sample([s["title"] for s in songs], 6)
    picks = rng.sample(library, 3)
    title = f"{rng.choice(WORDS).title()} {rng.choice(['evenings', 'workout', 'roadtrip', 'focus'])}"
    return chore("spotify", 3, setup=_spotify_setup(songs, library, {}),
                 public={"title": title, "songs": sorted(picks)},
                 instruction=f"Create a Spotify playlist named '{title}' holding exactly these songs from my library: "
                             + ", ".join(f"'{p}'" for p in picks) + ".",
                 steps=paged("spotify.show_song_library(access_token=token)", "library")
                 + f"pid = apis.spotify.create_playlist(title={title!r}, access_token=token)['playlist_id']\n"
                   f"for s in library:\n"
                   f"    if s['title'] in {picks!r}:\n"
                   "        apis.spotify.add_song_to_playlist(playlist_id=pid, song_id=s['song_id'], "
                   "access_token=token)\n",
                 checks=changed("spotify.Playlist", "one added, none removed",
                                "exactly one playlist is added, with the requested name")
                 + """\
    test.case(added[0].title, "==", public_data.title)
with test("the new playlist holds exactly the requested songs"):
    playlist = models.end.spotify.Playlist.find_one(title=public_data.title)
    links = models.end.spotify.PlaylistSong.find_all(playlist_id=playlist.id) if playlist else []
    titles = sorted(models.end.spotify.Song.find_one(id=link.song_id).title for link in links)
    test.case(titles, "==", public_data.songs)
""")


FAMILIES: dict[str, Callable[[random.Random], dict]] = {
    "spot_playlist_count": spot_playlist_count, "spot_like_song": spot_like_song,
    "spot_longest_song": spot_longest_song, "spot_playlist_size": spot_playlist_size,
    "spot_make_playlist": spot_make_playlist,
}
