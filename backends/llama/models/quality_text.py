"""Fixed English passages (written for this project) whose mean next-token log-probability checks re-quantised
weights against the original ones."""

QUALITY_PREFIX = "Here are a few short pieces of writing on everyday subjects."
"""Every passage is scored after this prefix (evaluated once and shared)."""

QUALITY_PASSAGES: tuple[str, ...] = (
    """A river begins as rain. Water that falls on high ground either sinks into the soil or runs across it, and the
water that runs finds the lowest path it can. Small channels join into streams, streams join into larger
streams, and after many miles the water that fell on a hillside in spring reaches the sea. Along the way it
carries sand, silt and stones, and it slowly changes the shape of the land it passes through.

People have always lived near rivers. A river gives fresh water for drinking and for crops, it carries boats
and trade, and the flat land beside it is often the richest soil in a region. Many of the oldest cities in the
world were built on the banks of great rivers, and their markets, bridges and harbours grew up where the
water was easiest to cross or to reach. Even today, a map of the places where most people live looks a lot
like a map of rivers and coasts.

Rivers are not always calm. After heavy rain or a fast spring melt, the water rises and spreads over the
fields beside it. These floods can destroy houses and roads, but they also leave behind a fresh layer of mud
that makes the land fertile again. Farmers in many countries learned to plan their year around the flood:
they planted after the water went down and harvested before it came back. Modern dams and walls control
many floods, but they also stop the mud from reaching the fields, so farmers must add fertiliser instead.

A river is also a home for plants and animals. Fish swim upstream to lay their eggs, birds feed in the
shallow water, and trees along the banks hold the soil in place with their roots. When the water is clean,
the whole valley benefits. When factories or towns pour waste into it, the damage travels downstream and can
harm people and animals far away from the place where the pollution began. For this reason, many countries
now measure the quality of their rivers every month and publish the results.

Engineers study rivers carefully before they build anything near them. They measure how much water flows
past a point each second, how fast the level can rise, and how the bed of the river moves over the years.
A bridge that stands on soft ground may be safe for decades and then fail after a single large flood, so the
numbers matter. Good planning uses records that go back a long time, because the largest floods are rare
and easy to forget.

Finally, rivers have a place in stories, songs and paintings. They stand for time, for travel, and for
change, because the water you see today is never the same water you saw yesterday. A person who sits by a
river for an hour watches a small part of a journey that began in the mountains and will end in the sea,
and that journey has been repeated, drop by drop, for millions of years.""",
    """The history of bread is long. Early farmers ground wild grain between stones and mixed the flour with water
to make a flat paste, which they baked on hot rocks. Later, people noticed that dough left in a warm place for
a day would rise and become lighter, because tiny living yeasts in the air and on the grain produced gas.
Bakers learned to keep a little of each day's dough to start the next batch, and this habit spread from
village to village. In towns, baking became a trade: a baker rose long before dawn, lit the oven, shaped the
loaves and sold them warm in the morning. Governments often set the price and weight of a loaf by law, since
bread was the main food of the poor and a sudden rise in its price could lead to hunger and unrest. Today most
bread in rich countries is made in large factories, yet small bakeries have returned in many cities. Making
bread at home is simple: flour, water, salt and yeast, some patience, and a hot oven are enough. The dough
should rest until it has doubled in size, then be shaped gently and left to rise once more before baking.""",
    """When the bus finally came, it was almost empty. Maria sat near the back, put her bag on her knees and
watched the town slide past the window: the closed bakery, the school with its dark windows, the petrol
station where her brother had worked one summer. The driver hummed to himself and did not look at the mirror.
At the third stop an old man got on with a small dog under his arm. He paid, looked around as if the seats
might have changed since his last journey, and sat down across from her. The dog studied Maria for a long
moment and then went to sleep. "He does that with everyone he likes," the man said. "With the others he
barks." Maria laughed for the first time that day. She told him she was going to the city for a job
interview, and that she had never worked in an office before. The man nodded slowly. "Then you will learn
quickly," he said, "because you will have to." When she got off at the station, the dog opened one eye and
closed it again, and the bus pulled away into the grey morning.""",
    """To change a flat tyre on a bicycle, first turn the bicycle upside down so that it rests on its seat and
handlebars. Open the brake if it is in the way, then loosen the nut or the quick-release lever that holds the
wheel and lift the wheel out of the frame. Use two tyre levers to push one side of the tyre over the edge of
the rim, working your way around until the inner tube can be pulled out. Pump a little air into the tube and
listen for the hiss, or hold it under water and look for bubbles, to find the hole. Before you fit a new tube
or a patch, run your fingers carefully along the inside of the tyre: a small piece of glass or a thorn is
often still there, and it will make a new hole within minutes if you leave it. Put the tube back with a
little air in it, push the tyre onto the rim with your thumbs, and check that the tube is not trapped between
the tyre and the rim. Pump the tyre to the pressure printed on its side, refit the wheel, close the brake,
and spin the wheel once to make sure it turns freely.""",
    """Why is the sky blue? Sunlight looks white, but it is a mixture of every colour, and each colour is a wave
of a different length. When sunlight enters the air, it meets countless tiny molecules of gas. These
molecules scatter short waves, such as blue and violet, much more strongly than long waves, such as red and
orange. So wherever you look in the sky, away from the sun itself, you see light that has been bounced
towards you from all directions, and most of that light is blue. Our eyes are less sensitive to violet, and
some violet light is absorbed high in the atmosphere, which is why the sky does not look purple. At sunrise
and sunset, the light from the sun must pass through much more air before it reaches us. By then, most of
the blue has been scattered away to the sides, and the light that is left is rich in red and orange. The
same effect explains why distant mountains look pale and bluish, and why the smoke from a fire can look blue
against a dark background but yellow against a bright one.""",
)
"""About 1,600 tokens in five pieces: an essay, a short history, a story with dialogue, instructions and an
explanation. Plain words, a few numbers, no quotations from other works."""
